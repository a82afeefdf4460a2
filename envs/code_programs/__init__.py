"""The programs Code-v0's judge runs, as real files: ``wire.py`` (plain data across the process boundary; imported
on the host, prepended to both programs), ``serve_solution.py`` (inside the sandbox: executes the solution and
answers call requests) and ``interactor.py`` (on the host: runs the tests against a stub that calls the sandbox).
The two programs are assembled by :mod:`agentgspo.envs.code` (their free names are defined by what precedes them).
"""
