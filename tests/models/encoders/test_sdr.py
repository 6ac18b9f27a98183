"""SDR's MLM weight: 0 leaves the MLM term (and the masking) out, any other value scales it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from docsim.models.encoders.backbone import load_tokenizer
from docsim.models.encoders.sdr import SdrBatch, SdrConfig, SdrModel
from docsim.models.inference.tokens import TextTokenizer
from docsim.models.training.losses import sdr_contrastive_loss

FIRST = ["The bread rose in the oven.", "Stars are far away."]
SECOND = ["The dough was kneaded twice.", "The court dismissed the appeal."]
POSITIVE = torch.tensor([True, False])


def model_and_batch(base: Path, mlm_weight: float) -> tuple[SdrModel, SdrBatch]:
    tokenizer = load_tokenizer(base)
    model = SdrModel.from_base(base, tokenizer, SdrConfig(mlm_weight=mlm_weight)).eval()
    return model, SdrBatch(TextTokenizer(tokenizer, 32)(FIRST + SECOND), POSITIVE)


def terms(base: Path, mlm_weight: float) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)  # the new MLM head's initialisation, then the masking
    model, batch = model_and_batch(base, mlm_weight)
    torch.manual_seed(1)
    with torch.no_grad():
        return model.loss(batch)


def test_mlm_weight_zero_gives_no_mlm_term(tiny_encoder_dir: Path) -> None:
    model, batch = model_and_batch(tiny_encoder_dir, 0.0)
    with torch.no_grad():
        got = model.loss(batch)
        pooled = model.embed(batch.tokens)  # (4, H), nothing masked
    assert set(got) == {"contrastive"}
    expected = sdr_contrastive_loss(pooled[:2], pooled[2:], POSITIVE)
    assert got["contrastive"].item() == pytest.approx(expected.item(), rel=1e-5)


def test_mlm_weight_scales_the_mlm_term(tiny_encoder_dir: Path) -> None:
    full, half = terms(tiny_encoder_dir, 1.0), terms(tiny_encoder_dir, 0.5)
    assert set(full) == set(half) == {"contrastive", "mlm"}
    assert half["mlm"].item() == pytest.approx(0.5 * full["mlm"].item(), rel=1e-5)
    assert half["contrastive"].item() == pytest.approx(full["contrastive"].item(), rel=1e-5)
