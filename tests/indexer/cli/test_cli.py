from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from docsim.app.cli import docsim as command_line
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.tables import documents, index_versions
from docsim.indexer.store.versions import active_version
from docsim.search.settings import QuerySettings
from tests.utils.corpora import synthetic_markdown, write_jsonl, write_text_corpus

cli = command_line()  # the indexer's commands, the search layer's `evaluate` and `serve`

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]


def invoke(*args: str):
    return runner.invoke(cli, list(args))


def test_version_prints_the_installed_distributions_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    assert result.output == f"docsim {version('docsim')}\n"
    declared = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert declared is not None and version("docsim") == declared.group(1)


def index_with_tiny(corpus: Path, tiny: Path, data: Path):
    """`docsim index` of `corpus` with the tiny encoder into `data`, in-process."""
    return invoke(
        "index", str(corpus), "--encoder", str(tiny), "--data-dir", str(data), "--no-progress"
    )


def test_index_then_info(sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = index_with_tiny(sample_corpus, tiny_encoder_dir, data)
    assert result.exit_code == 0, result.output
    built = json.loads(result.stdout)
    shown = invoke("info", "--data-dir", str(data))
    assert shown.exit_code == 0, shown.output
    info = json.loads(shown.stdout)
    assert info["version_id"] == built["version_id"]
    assert info["counts"] == built["counts"] == info["manifest"]["counts"]
    assert info["counts"]["document"] == 48


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["index", "{tmp}/missing", "--encoder", "{tiny}"], "does not exist"),
        (["index", "{corpus}", "--encoder", "{tmp}/no-such-model"], "neither a built-in encoder"),
        (["index", "{corpus}", "--encoder", "{tmp}"], "is not a model directory"),
        (
            ["index", "{corpus}", "--encoder", "{tiny}", "--data-dir", "{tmp}/file/sub"],
            "{folder_error}",
        ),
        (["info"], "no index version is active yet: run `docsim index` first"),
    ],
)
def test_bad_input_gets_a_clear_message(
    args: list[str],
    message: str,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    on_postgres: bool,
) -> None:
    # on SQLite the database file is the first thing made in the data directory
    folder_error = "is not writable" if on_postgres else "cannot create the database folder"
    message = message.format(folder_error=folder_error)
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "data").mkdir()  # `info` refuses a data directory that does not exist
    filled = [a.format(tmp=tmp_path, tiny=tiny_encoder_dir, corpus=sample_corpus) for a in args]
    if "--data-dir" not in filled:
        filled += ["--data-dir", str(tmp_path / "data")]
    result = invoke(*filled)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_a_missing_corpus_is_reported_before_the_encoder_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docsim.indexer.cli.index

    def never(*_args, **_kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the encoder was loaded for a corpus that does not exist")

    monkeypatch.setattr(docsim.indexer.cli.index, "load_configured_encoder", never)
    result = invoke("index", str(tmp_path / "nonexistent"), "--data-dir", str(tmp_path / "d"))
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_help_names_every_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    summary = result.stdout.split("Options")[0]
    for command in ("index", "info", "serve", "evaluate", "train", "reindex", "worker"):
        assert f"`{command}`" in summary, command


def test_unwritable_index_folder(
    sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "indexes").write_text("a file where the folder should be")
    result = invoke(
        "index", str(sample_corpus), "--encoder", str(tiny_encoder_dir), "--data-dir", str(data)
    )
    assert result.exit_code == 2
    assert "is not writable" in result.stderr


def _start_build(corpus: Path, tiny: Path, data: Path) -> subprocess.Popen:
    env = {**os.environ, "DOCSIM_INDEX__BLOCK_DOCUMENTS": "4"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "docsim.indexer.cli.main",
            "index",
            str(corpus),
            "--encoder",
            str(tiny),
            "--data-dir",
            str(data),
            "--no-progress",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it: a test run started in the background by a
        # non-interactive shell ignores SIGINT, and its children would inherit that
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_building_rows(data: Path, timeout: float = 120) -> int:
    engine = make_engine(QuerySettings(data_dir=data).database_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                with engine.connect() as conn:
                    row = conn.execute(
                        select(index_versions.c.version_id).where(
                            index_versions.c.status == "building"
                        )
                    ).first()
                    if (
                        row
                        and conn.execute(
                            select(documents.c.doc_id)
                            .where(documents.c.version_id == row.version_id)
                            .limit(1)
                        ).first()
                    ):
                        return int(row.version_id)
            except Exception:  # noqa: BLE001 - the database may not exist yet
                pass
            time.sleep(0.05)
    finally:
        engine.dispose()
    raise AssertionError("the build never started writing")


@pytest.mark.long
@pytest.mark.heavy_sql
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_killed_build_keeps_the_active_version(
    sig: signal.Signals, sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    first = index_with_tiny(sample_corpus, tiny_encoder_dir, data)
    assert first.exit_code == 0, first.output
    big = write_text_corpus(tmp_path / "big", synthetic_markdown(800))
    process = _start_build(big, tiny_encoder_dir, data)
    building = _wait_for_building_rows(data)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=120)
    engine = make_engine(QuerySettings(data_dir=data).database_url)
    assert active_version(engine).version_id == 1
    assert "Traceback" not in stderr
    if sig == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:  # Ctrl-C and kill clean up at once
        assert process.returncode == 130
        assert "the active version is unchanged" in stderr
        assert not list((data / "indexes").glob("*.tmp"))
    # the next build recovers whatever was left, then publishes
    again = index_with_tiny(sample_corpus, tiny_encoder_dir, data)
    assert again.exit_code == 0, again.output
    assert not list((data / "indexes").glob("*.tmp"))
    with engine.connect() as conn:
        status = conn.execute(
            select(index_versions.c.status).where(index_versions.c.version_id == building)
        ).scalar_one()
        leftover = conn.execute(
            select(documents.c.doc_id).where(documents.c.version_id == building)
        ).first()
    assert status == "failed" and leftover is None
    assert active_version(engine).version_id == json.loads(again.stdout)["version_id"]
    engine.dispose()


def test_reindex_runs_a_recorded_job(
    sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    assert index_with_tiny(sample_corpus, tiny_encoder_dir, data).exit_code == 0
    result = invoke(
        "reindex",
        "current",
        "--encoder",
        str(tiny_encoder_dir),
        "--data-dir",
        str(data),
        "--no-progress",
    )
    assert result.exit_code == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "succeeded" and outcome["index_version"] == 2
    info = json.loads(invoke("info", "--data-dir", str(data)).stdout)
    assert info["manifest"]["version_id"] == 2
    assert info["manifest"]["corpus"]["path"].startswith("current")
    assert info["counts"]["document"] == 48  # the stored documents, encoded again
    again = invoke("reindex", "--retry", str(outcome["job_id"]), "--data-dir", str(data))
    assert again.exit_code == 2 and "only failed or cancelled jobs" in again.stderr
    missing = invoke("reindex", str(tmp_path / "nope"), "--data-dir", str(data))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


def test_evaluate_migrates_an_older_database_first(
    sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    from docsim.indexer.store.db import downgrade

    data = tmp_path / "data"
    assert index_with_tiny(sample_corpus, tiny_encoder_dir, data).exit_code == 0
    url = QuerySettings(data_dir=data).database_url
    downgrade(url, "0002")  # as a database written before jobs and document changes existed
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps({"qid": "q1", "text": (sample_corpus / "baking-01.md").read_text()}) + "\n"
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 Q0 baking-02 1\nq1 Q0 oceans-01 0\n")
    out = tmp_path / "evaluation.json"
    result = invoke(
        "evaluate",
        "--data-dir",
        str(data),
        "--queries",
        str(queries),
        "--qrels",
        str(qrels),
        "--method",
        "sdr",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(out.read_text())
    assert 0 < report["methods"]["sdr"]["mean"]["MAP"] <= 1


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ("{}", "its config.json names no model_type"),
        ('{"model_type": "bert"}', "it holds no weights"),
        ("{not json", "config.json is not valid JSON"),
    ],
    ids=["empty-config", "no-weights", "invalid-json"],
)
def test_unusable_encoder_directory_is_a_user_error(
    config: str, problem: str, sample_corpus: Path, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(config)
    result = invoke(
        "index", str(sample_corpus), "--encoder", str(model), "--data-dir", str(tmp_path / "data")
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("docsim: error:"), result.stderr
    assert str(model) in lines[0] and problem in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["info", "evaluate"])
def test_read_only_commands_need_an_existing_data_dir(command: str, tmp_path: Path) -> None:
    data = tmp_path / "missing"
    args = [command, "--data-dir", str(data)]
    if command == "evaluate":
        (tmp_path / "queries.jsonl").write_text(json.dumps({"qid": "q1", "text": "x"}) + "\n")
        (tmp_path / "qrels.txt").write_text("q1 Q0 d1 1\n")
        args += [
            "--queries",
            str(tmp_path / "queries.jsonl"),
            "--qrels",
            str(tmp_path / "qrels.txt"),
        ]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("docsim: error:"), result.stderr
    assert f"data directory {str(data)!r} does not exist" in lines[0]
    assert not data.exists()


def test_jsonl_ids_with_slashes_are_indexed(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    records = [
        {"id": "10.1000/xyz-1", "text": "Zeppelins rose above the lake. Hulls held hydrogen."},
        {"id": "a/b/c", "text": "Glaciers carve valleys. Moraines mark where the ice stopped."},
        {"id": "plain", "text": "Bread rises when yeast ferments the dough in a warm kitchen."},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = tmp_path / "data"
    result = index_with_tiny(corpus, tiny_encoder_dir, data)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counts"]["document"] == 3
    engine = make_engine(QuerySettings(data_dir=data).database_url)
    with engine.connect() as conn:
        ids = set(conn.execute(select(documents.c.external_id)).scalars())
    engine.dispose()
    assert ids == {r["id"] for r in records}


def test_repeated_index_runs_retire_old_versions(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention runs after every publish, not only in the worker: the active version and
    `KEEP_VERSIONS - 1` others stay; older ones lose their rows and folders."""
    monkeypatch.setenv("DOCSIM_JOBS__RETIRE_GRACE_SECONDS", "0")
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "One sentence here."}])
    data = tmp_path / "data"
    outputs = []
    for _ in range(3):
        result = index_with_tiny(corpus, tiny_encoder_dir, data)
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.stdout))
    assert [o["retired"] for o in outputs] == [[], [], [1]]
    folders = sorted(p.name for p in (data / "indexes").iterdir() if p.is_dir())
    assert folders == [Path(o["path"]).name for o in outputs[1:]]


@pytest.mark.heavy_sql
def test_a_first_run_prints_docsims_lines_not_its_libraries_noise(
    tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    """A first `docsim index` printed ten Alembic "setup plugin" lines, faiss's
    ModuleNotFoundError lines, transformers' `loss_type` warning and "Loading weights" bar,
    and "as a text corpus"."""
    corpus = write_text_corpus(
        tmp_path / "c", {"a.md": "# A\n\nOne. Two.", "b.md": "# B\n\nThree."}
    )
    done = subprocess.run(
        [sys.executable, "-m", "docsim.indexer.cli.main", "index", str(corpus), "--encoder",
         str(tiny_encoder_dir), "--data-dir", str(tmp_path / "data"), "--no-progress"],
        capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for noise in ("setup plugin", "ModuleNotFoundError", "loss_type", "Loading weights", "as a"):
        assert noise not in done.stderr, noise
    assert "(format: text)" in done.stderr and "Published version 1" in done.stderr
