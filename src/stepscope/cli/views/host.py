"""`stepscope show RUN --host`: hottest Python functions per region and step phase (--sample-stacks)."""

from __future__ import annotations

import argparse

from stepscope.analyze.summary import RunSummary
from stepscope.model.tables import RunData


def show_host(data: RunData, summary: RunSummary, args: argparse.Namespace) -> int:
    from stepscope.analyze.hostprof import host_profile

    profile = host_profile(data)
    if getattr(args, "json", False):
        from stepscope.cli.common import print_json

        print_json(profile.to_dict())
        return 0
    from stepscope.report.hostprof import host_view
    from stepscope.report.terminal import console

    console(width=getattr(args, "width", None)).print(host_view(profile))
    return 0
