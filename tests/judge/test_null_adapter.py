"""The null adapter: same shapes and norms as the trained one, seeded, order-free."""

import torch

from dlm.judge.null import null_state


def trained() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "layer.0.lora_A.weight": torch.randn(8, 32, generator=g),
        "layer.0.lora_B.weight": torch.randn(32, 8, generator=g) * 0.01,
        "layer.1.lora_B.weight": torch.zeros(32, 8),
    }


def test_null_matrices_keep_shape_and_norm_but_not_direction() -> None:
    weights = trained()
    null = null_state(weights, seed=42)
    assert set(null) == set(weights)
    for name, tensor in weights.items():
        assert null[name].shape == tensor.shape
        assert torch.isclose(null[name].norm(), tensor.norm(), rtol=1e-5, atol=1e-7)
    cosine = torch.nn.functional.cosine_similarity(
        null["layer.0.lora_A.weight"].flatten(), weights["layer.0.lora_A.weight"].flatten(), dim=0
    )
    assert abs(float(cosine)) < 0.2
    assert float(null["layer.1.lora_B.weight"].abs().sum()) == 0.0  # an untrained B stays zero


def test_null_adapter_is_a_function_of_the_seed_and_names_only() -> None:
    weights = trained()
    reordered = dict(reversed(list(weights.items())))
    a, b = null_state(weights, 42), null_state(reordered, 42)
    assert all(torch.equal(a[n], b[n]) for n in a)
    c = null_state(weights, 43)
    assert not torch.equal(a["layer.0.lora_A.weight"], c["layer.0.lora_A.weight"])
