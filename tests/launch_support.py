"""Two gloo ranks on CPU under ``accelerate launch``: the command prefix the FSDP, DDP and quickstart tests run
their workers with (tests/learning/test_fsdp.py, tests/learning/test_learner.py, tests/training/test_quickstart.py)."""

from __future__ import annotations

import sys

LAUNCH = [
    sys.executable,
    "-m",
    "accelerate.commands.launch",
    "--multi_gpu",
    "--num_processes",
    "2",
    "--num_machines",
    "1",
    "--main_process_port",  # 0: a free port, so that launches in other tests (other pytest workers) never clash
    "0",
    "--mixed_precision",
    "no",
    "--dynamo_backend",
    "no",
]
