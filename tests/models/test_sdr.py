"""SDR's MLM weight: 0 leaves the MLM term (and the masking) out, any other value scales it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.losses import sdr_contrastive_loss
from models.sdr import SdrBatch, SdrModel

BATCH = SdrBatch(
    first=["The bread rose in the oven.", "Stars are far away."],
    second=["The dough was kneaded twice.", "The court dismissed the appeal."],
    positive=torch.tensor([True, False]),
)


def terms(base: Path, mlm_weight: float) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)  # the new MLM head's initialisation, then the masking
    model = SdrModel.from_base(base, max_tokens=32, mlm_weight=mlm_weight).eval()
    torch.manual_seed(1)
    with torch.no_grad():
        return model.loss(BATCH)


def test_mlm_weight_zero_gives_no_mlm_term(tiny_encoder_dir: Path) -> None:
    model = SdrModel.from_base(tiny_encoder_dir, max_tokens=32, mlm_weight=0.0).eval()
    with torch.no_grad():
        got = model.loss(BATCH)
        pooled = model.embed(BATCH.first + BATCH.second)  # (4, H), nothing masked
    assert set(got) == {"contrastive"}
    expected = sdr_contrastive_loss(pooled[:2], pooled[2:], BATCH.positive)
    assert got["contrastive"].item() == pytest.approx(expected.item(), rel=1e-5)


def test_mlm_weight_scales_the_mlm_term(tiny_encoder_dir: Path) -> None:
    full, half = terms(tiny_encoder_dir, 1.0), terms(tiny_encoder_dir, 0.5)
    assert set(full) == set(half) == {"contrastive", "mlm"}
    assert half["mlm"].item() == pytest.approx(0.5 * full["mlm"].item(), rel=1e-5)
    assert half["contrastive"].item() == pytest.approx(full["contrastive"].item(), rel=1e-5)
