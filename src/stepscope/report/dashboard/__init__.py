"""The dashboard over the store: a static site (`stepscope dashboard build`) and the same pages served
live (`stepscope serve`). See :mod:`stepscope.report.dashboard.site`."""

from stepscope.report.dashboard.site import DashRun, Site, pages, write_site

__all__ = ["DashRun", "Site", "pages", "write_site"]
