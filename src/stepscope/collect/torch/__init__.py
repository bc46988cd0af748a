"""torch"""
