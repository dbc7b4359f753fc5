"""Starting node processes and whole local clusters, and finding and stopping them again:
used by the command line (``qmgr start``'s callers, ``qmgr cluster``, ``qmgr demo``), the load
job, the tests and the benchmarks. Nothing here knows the command line: failures are
:class:`qmgr.launcher.errors.LaunchError`s. The package's own import stays empty so that
``python -m qmgr.cli.health`` (a container's healthcheck) pulls in nothing it does not use."""
