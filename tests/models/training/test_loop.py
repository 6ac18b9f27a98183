"""The shared loop's early stopping on a toy model: it stops after `patience` evaluations
without improvement, saves the best evaluation's weights (the base when nothing beat it), and
a resumed run keeps its evaluations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from docsim.models.encoders.adapt import AdaptModel, PairSampler
from docsim.models.encoders.backbone import load_tokenizer
from docsim.models.encoders.loading import load_encoder
from docsim.models.inference.tokens import TextTokenizer
from docsim.models.training.data import held_out_split
from docsim.models.training.held_out import HeldOutPairs, held_out_pairs
from docsim.models.training.loop import Evaluation, TrainConfig, train
from tests.utils.corpora import training_documents
from tests.utils.tiny_models import write_tiny_encoder


class Scripted:
    """An evaluation whose scores are given in advance; it remembers the weights it saw."""

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores
        self.seen: list[torch.Tensor] = []

    def __call__(self, model: torch.nn.Module) -> Evaluation:
        self.seen.append(model.weight.detach().clone())
        score = self.scores[len(self.seen) - 1]
        return Evaluation(score=score, metrics={"loss": -score})


def run(
    out: Path,
    scores: list[float],
    *,
    steps: int = 20,
    resume: bool = False,
    max_seconds: float | None = None,
    **config,
):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    evaluate = Scripted(scores)
    values = {"eval_every": 2, "patience": 2, "checkpoint_every": 3, "precision": "fp32"}
    result = train(
        model,
        TrainConfig(
            kind="toy", base="none", steps=steps, learning_rate=0.1, **{**values, **config}
        ),
        out,
        draw_batch=lambda rng: torch.tensor([[rng.random() for _ in range(3)]]),
        batch_loss=lambda m, x: {"mse": ((m(x) - 1.0) ** 2).mean()},
        save_encoder=lambda m, o: torch.save(m.state_dict(), o / "toy.pt"),
        device=torch.device("cpu"),
        evaluate=evaluate,
        resume=resume,
        show_progress=False,
        max_seconds=max_seconds,
    )
    return result, evaluate, torch.load(out / "toy.pt")


def test_stops_after_patience_evaluations_and_saves_the_best(tmp_path: Path) -> None:
    # evaluations at steps 0, 2, 4, 6, 8: the best is step 4; 6 and 8 do not beat it
    result, evaluate, saved = run(tmp_path, [0.1, 0.3, 0.5, 0.5, 0.2, 0.9])
    assert [e["step"] for e in result.evaluations] == [0, 2, 4, 6, 8]
    assert result.steps == 8 and result.stopped_early
    assert result.best_step == 4  # an equal score is no improvement
    assert torch.equal(saved["weight"], evaluate.seen[2])
    assert not torch.equal(saved["weight"], evaluate.seen[-1])  # not the last model
    report = json.loads((tmp_path / "training.json").read_text())
    assert report["best_step"] == 4 and report["stopped_early"]
    assert [e["loss"] for e in report["evaluations"]] == [-0.1, -0.3, -0.5, -0.5, -0.2]


def test_the_base_is_the_output_when_nothing_beats_it(tmp_path: Path) -> None:
    result, evaluate, saved = run(tmp_path, [0.9, 0.1, 0.2])
    assert result.best_step == 0 and result.steps == 4
    assert torch.equal(saved["weight"], evaluate.seen[0])


def test_without_patience_the_run_goes_on_and_evaluates_the_last_step(tmp_path: Path) -> None:
    result, evaluate, saved = run(tmp_path, [0.1, 0.0, 0.0, 0.5, 0.0, 0.0], steps=9, patience=0)
    assert [e["step"] for e in result.evaluations] == [0, 2, 4, 6, 8, 9]
    assert result.steps == 9 and not result.stopped_early and result.best_step == 6
    assert torch.equal(saved["weight"], evaluate.seen[3])


def test_a_resumed_run_keeps_its_evaluations_and_best_model(tmp_path: Path) -> None:
    whole, evaluate, whole_saved = run(tmp_path / "whole", [0.1, 0.3, 0.5, 0.4, 0.2])
    run(tmp_path / "parts", [0.1, 0.3, 0.2], steps=3)  # evaluated at 0, 2 and 3 (its last)
    # resumed from the checkpoint at 3, it evaluates at 4 (the best), 6 and 8, then stops
    resumed, _, saved = run(tmp_path / "parts", [0.5, 0.4, 0.2], resume=True)
    assert resumed.resumed_from == 3
    assert [e["step"] for e in resumed.evaluations] == [0, 2, 3, 4, 6, 8]
    assert resumed.best_step == 4 and resumed.steps == 8
    assert torch.allclose(saved["weight"], evaluate.seen[2])  # the same model as whole's best
    assert torch.allclose(saved["weight"], whole_saved["weight"])
    # resuming a stopped run stops again at once, with the same output
    again, _, saved_again = run(tmp_path / "parts", [], resume=True)
    assert again.steps == 8 and again.stopped_early
    assert torch.equal(saved_again["weight"], saved["weight"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_adapt_trains_and_evaluates_on_cuda_under_autocast(tmp_path: Path) -> None:
    """Every tensor follows the model to the GPU (batches, held-out pairs, the loss), in bf16
    autocast, and the best model is saved and loads like the base."""
    base = write_tiny_encoder(tmp_path / "tiny")
    train_docs, held = held_out_split(training_documents(24), seed=0)
    model = AdaptModel.from_base(base)
    tokenizer = load_tokenizer(base)
    tokens = TextTokenizer(tokenizer, 32)
    out = tmp_path / "out"
    result = train(
        model,
        TrainConfig(kind="adapt", base=str(base), steps=4, batch_size=4, eval_every=2),
        out,
        draw_batch=PairSampler(train_docs, 4, "neighbours", tokens),
        batch_loss=lambda m, batch: m.loss(batch),
        save_encoder=lambda m, o: m.save(o, tokenizer, base, {}),
        device=torch.device("cuda"),
        evaluate=HeldOutPairs(held_out_pairs(held, "neighbours"), tokens),
        show_progress=False,
    )
    assert [e["step"] for e in result.evaluations] == [0, 2, 4]
    assert {p.device.type for p in model.parameters()} == {"cuda"}
    encoder = load_encoder(out, precision="bf16", device="cuda")
    assert encoder.encode(["The bread rose."]).shape == (1, 32)


def test_a_time_bound_stops_after_the_step_checkpoints_and_resumes(tmp_path: Path) -> None:
    # no time at all: one step runs, is checkpointed, and the best evaluated (the base) is kept
    first, evaluate, saved = run(tmp_path, [0.1, 0.3, 0.5, 0.4, 0.2], max_seconds=0.0)
    assert first.steps == 1 and first.out_of_time and not first.stopped_early
    assert [e["step"] for e in first.evaluations] == [0]
    assert torch.equal(saved["weight"], evaluate.seen[0])
    report = json.loads((tmp_path / "training.json").read_text())
    assert report["out_of_time"] and report["steps"] == 1
    # resumed without a bound, the run goes on from step 1 and stops as patience says
    resumed, _, _ = run(tmp_path, [0.3, 0.5, 0.4, 0.2], resume=True)
    assert resumed.resumed_from == 1 and not resumed.out_of_time
    assert [e["step"] for e in resumed.evaluations] == [0, 2, 4, 6, 8]
    assert resumed.best_step == 4 and resumed.steps == 8 and resumed.stopped_early
    # a bound that is never reached changes nothing
    plenty, _, _ = run(tmp_path / "plenty", [0.1, 0.3, 0.5, 0.5, 0.2], max_seconds=3600.0)
    assert plenty.steps == 8 and not plenty.out_of_time and plenty.best_step == 4
