"""The subcommands of the `agentgspo` console command, one module each (imported lazily by ``agentgspo.cli``)."""
