from stepscope.cli import entry

entry()
