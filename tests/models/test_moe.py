"""Tests for agentgspo.models.moe: ``experts_implementation="agentgspo"`` equals transformers' experts on MoE
models."""

import pytest
import torch

from tiny_models import SHAPE, build_tiny

moe = pytest.importorskip("agentgspo.models.moe")
try:
    moe.register()
except ImportError as exc:  # transformers < 5 or torch < 2.10: nothing to test
    pytest.skip(str(exc), allow_module_level=True)

MODELS = ["qwen3_moe", "mixtral", "olmoe"]  # top-k 3 and 2; short inputs leave experts without tokens
VOCAB = SHAPE["vocab_size"]
HIDDEN = SHAPE["hidden_size"]


def forward_backward(model, implementation: str, input_ids):
    """Logits and every parameter's gradient of a fixed non-uniform function of the logits."""
    model.set_experts_implementation(implementation)
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=input_ids).logits  # [B, T, V]
    weights = torch.linspace(-1, 1, logits.numel()).view_as(logits)
    (logits.float() * weights).sum().backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("input_shape", [(3, 11), (1, 2)])  # (1, 2): most experts get no token
def test_same_logits_and_gradients_as_transformers_experts(name, input_shape):
    model = build_tiny(name)
    input_ids = torch.randint(0, VOCAB, input_shape, generator=torch.Generator().manual_seed(1))
    reference_logits, reference_grads = forward_backward(model, "eager", input_ids)  # transformers' expert loop
    logits, grads = forward_backward(model, "agentgspo", input_ids)
    torch.testing.assert_close(logits, reference_logits, rtol=0, atol=1e-6)
    assert grads.keys() == reference_grads.keys()
    assert any(".experts." in n for n in grads)  # the experts were trained, not skipped
    for param_name, grad in grads.items():
        torch.testing.assert_close(grad, reference_grads[param_name], rtol=1e-5, atol=1e-5, msg=param_name)


def test_bf16_matches_grouped_mm():
    model = build_tiny("qwen3_moe", dtype=torch.bfloat16)
    input_ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(2))
    reference_logits, reference_grads = forward_backward(model, "grouped_mm", input_ids)
    logits, grads = forward_backward(model, "agentgspo", input_ids)
    torch.testing.assert_close(logits, reference_logits, rtol=0, atol=2e-2)
    for param_name, grad in grads.items():
        scale = reference_grads[param_name].abs().max().item() + 1e-6
        assert (grad - reference_grads[param_name]).abs().max().item() <= 2e-2 * scale, param_name


def backward_ops(output: torch.Tensor) -> set[str]:
    """Names of every autograd node that backpropagating ``output`` runs."""
    seen, stack, names = set(), [output.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return names


def test_backward_has_no_scatter_add():
    """The point of the implementation: no index backward (an atomic index_put accumulate) in an experts layer."""
    experts = build_tiny("qwen3_moe").model.layers[0].mlp.experts
    tokens, k = 10, 3
    hidden = torch.randn(tokens, HIDDEN, requires_grad=True)
    top_k_index = torch.stack([torch.randperm(8)[:k] for _ in range(tokens)])  # [T, k]
    top_k_weights = torch.rand(tokens, k, requires_grad=True)
    experts.config._experts_implementation = "grouped_mm"
    assert "IndexBackward0" in backward_ops(experts(hidden, top_k_index, top_k_weights))  # the reference does
    experts.config._experts_implementation = "agentgspo"
    ops = backward_ops(experts(hidden, top_k_index, top_k_weights))
    assert "IndexBackward0" not in ops and "IndexPutBackward0" not in ops, ops


def test_expert_parallel_is_refused_clearly():
    experts = build_tiny("qwen3_moe").model.layers[0].mlp.experts
    experts.config._experts_implementation = "agentgspo"
    experts._is_expert_parallel = True
    with pytest.raises(NotImplementedError, match="grouped_mm"):
        experts(torch.randn(4, HIDDEN), torch.zeros(4, 3, dtype=torch.long), torch.ones(4, 3))


def test_policy_loads_with_our_experts(tiny_path):
    from agentgspo.policy.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_path, experts_implementation="agentgspo")
    assert policy.model.config._experts_implementation == "agentgspo"
    reference = HFPolicy.from_pretrained(tiny_path)
    input_ids = torch.arange(1, 40).view(3, 13)
    with torch.no_grad():
        torch.testing.assert_close(
            policy.model(input_ids=input_ids).logits, reference.model(input_ids=input_ids).logits, rtol=0, atol=1e-5
        )
