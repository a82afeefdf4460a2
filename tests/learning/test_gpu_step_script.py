"""benchmarks/gpu_gspo_step.py runs end to end in its CPU smoke mode, so a lent GPU's minutes are not lost to a bug."""

import pytest
import json
import subprocess
import sys
from pathlib import Path

# The whole module is slow: it starts vLLM, Ray, DeepSpeed or a training run (docs/contributing.md).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_run_measures_and_profiles_our_experts(tmp_path):
    variants = "j_ours_b8,p_profile_ours_b8"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_gspo_step.py"),
            "--smoke",
            "--out",
            str(tmp_path),
            "--variants",
            variants,
        ],
        check=True,
        timeout=600,
        capture_output=True,
        text=True,
    )
    report = json.loads((tmp_path / "gpu_gspo_step.json").read_text())
    assert report["params_active"] < report["params_total"]
    for name in variants.split(","):
        result = report["variants"][name]
        assert result["status"] == "ok", result["status"]
        assert result["experts"] == "agentgspo" and result["loss_finite"] and result["tokens_per_s"] > 0
        assert result["fused_vs_token_logprobs_max_abs_diff"] < 1e-3
    profile = report["variants"]["p_profile_ours_b8"]["kernel_profile"]
    assert profile["device_ms_per_step"] > 0 and profile["top_kernels_ms_per_step"]
    assert "grouped_gemm" in profile["ms_per_step_by_family"]  # the experts ran as grouped GEMMs
