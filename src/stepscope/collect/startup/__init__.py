"""startup"""
