"""`stepscope show RUN --host`: hottest Python functions per region and step phase (--sample-stacks)."""

from __future__ import annotations

from stepscope.app import RunAnalysis


def show_host(ra: RunAnalysis, *, json: bool = False, width: int | None = None) -> int:
    from stepscope.analyze.run.hostprof import host_profile

    profile = host_profile(ra.data)
    if json:
        from stepscope.cli.common import print_json

        print_json(profile.to_dict())
        return 0
    from stepscope.report.hostprof import host_view
    from stepscope.report.terminal import console

    console(width=width).print(host_view(profile))
    return 0
