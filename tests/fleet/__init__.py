"""Tests of the fleet (agentgspo/fleet/): the fleet file, the manifest, and real fleets started by both launchers."""
