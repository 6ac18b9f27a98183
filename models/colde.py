"""CoLDE (Jha et al.): chunk encoder with section and chunk position embeddings, chunkwise
attention across sections, a Bi-LSTM and a 256-d projection, trained with the supervised
contrastive loss (temperature 0.5).

A section is cut into chunks of at most `max_tokens` tokens. Each chunk's token embeddings
get a learned section embedding and chunk embedding added (not shifted token ids: the
backbone still adds its own positions) before the backbone; chunk vectors are the mean of
the token states. Multi-head (4) chunkwise attention takes a section's chunks as queries and
the next section's chunks as keys and values (the last section looks at the one before; a
lone section at itself). A Bi-LSTM runs over each section's [chunk; attended] sequence; the
mean of its states, projected, is the section vector; the projected states are chunk vectors;
the mean of section vectors is the document vector.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from models.backbone import load_backbone, load_tokenizer
from models.inference import (
    OPENVINO_INT8,
    TORCH,
    BackendUnavailableError,
    OpenVinoBackend,
    export_openvino_int8_embeddings,
)
from models.losses import supervised_contrastive_loss
from models.pooling import mean_pool
from models.precision import autocast, autocast_dtype
from models.training_data import TrainingDocument, require_documents


@dataclass
class EncodedSections:
    """One document's outputs. Shapes: S sections, C_p chunks in section p, D projection."""

    sections: torch.Tensor  # (S, D)
    chunks: list[torch.Tensor]  # per section (C_p, D)
    attention: list[torch.Tensor]  # per section (C_p, C_q): weights over the keyed section


class ColdeModel(torch.nn.Module):
    TRAIN_CHUNKS = 4  # chunks per section while training (CPU budget); inference uses all

    def __init__(
        self,
        backbone: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        dim: int = 256,
        lstm_hidden: int = 256,
        heads: int = 4,
        max_sections: int = 5,
        max_chunks: int = 64,
        max_tokens: int = 256,
        temperature: float = 0.5,
    ) -> None:
        super().__init__()
        hidden = backbone.config.hidden_size
        if hidden % heads:
            raise ValueError(f"the backbone's hidden size {hidden} is not divisible by {heads}")
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.section_embeddings = torch.nn.Embedding(max_sections, hidden)
        self.chunk_embeddings = torch.nn.Embedding(max_chunks, hidden)
        for table in (self.section_embeddings, self.chunk_embeddings):
            torch.nn.init.normal_(table.weight, std=0.02)
        self.attention = torch.nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.lstm = torch.nn.LSTM(2 * hidden, lstm_hidden, batch_first=True, bidirectional=True)
        self.projection = torch.nn.Linear(2 * lstm_hidden, dim)
        self.dim, self.heads, self.lstm_hidden = dim, heads, lstm_hidden
        self.max_sections, self.max_chunks = max_sections, max_chunks
        self.max_tokens, self.temperature = max_tokens, temperature

    def architecture(self) -> dict:
        return {
            "dim": self.dim,
            "lstm_hidden": self.lstm_hidden,
            "heads": self.heads,
            "max_sections": self.max_sections,
            "max_chunks": self.max_chunks,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }

    # --- chunks -----------------------------------------------------------------------------
    def chunk_ids(self, text: str, max_chunks: int | None = None) -> list[list[int]]:
        """Token ids of a section's chunks (content tokens only, `max_tokens - 2` each)."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        size = self.max_tokens - self.tokenizer.num_special_tokens_to_add(pair=False)
        chunks = [ids[i : i + size] for i in range(0, max(len(ids), 1), size)] or [[]]
        limit = min(max_chunks or self.max_chunks, self.max_chunks)
        return chunks[:limit]

    def encode_chunks(
        self,
        chunks: list[list[int]],
        sections: list[int],
        positions: list[int],
        backbone: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """`(n, H)` mean-pooled backbone states of chunks (content ids), each with its section
        and chunk position embeddings added to its token embeddings. `backbone` (default: the
        module's own) maps `(n, T, H)` embeddings and the `(n, T)` mask to token states."""
        embeds, mask = self.chunk_inputs(chunks, sections, positions)
        if backbone is None:
            hidden = self.backbone(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        else:
            hidden = backbone(embeds, mask).to(mask.device)
        return mean_pool(hidden, mask)  # (n, H)

    def chunk_inputs(
        self, chunks: list[list[int]], sections: list[int], positions: list[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The backbone's input for chunks: token embeddings plus section and chunk position
        embeddings `(n, T, H)`, and the attention mask `(n, T)`."""
        device = next(self.parameters()).device
        with_special = [with_special_tokens(self.tokenizer, c) for c in chunks]
        longest = max(len(c) for c in with_special)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(chunks), longest), pad, dtype=torch.long)  # (n, T)
        mask = torch.zeros((len(chunks), longest), dtype=torch.long)  # (n, T)
        for i, c in enumerate(with_special):
            input_ids[i, : len(c)] = torch.tensor(c)
            mask[i, : len(c)] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        section = torch.tensor(sections, device=device).clamp(max=self.max_sections - 1)
        position = torch.tensor(positions, device=device).clamp(max=self.max_chunks - 1)
        embeds = self.backbone.get_input_embeddings()(input_ids)  # (n, T, H)
        embeds = (
            embeds
            + (self.section_embeddings(section) + self.chunk_embeddings(position))[:, None, :]
        )
        return embeds, mask

    # --- sections ---------------------------------------------------------------------------
    def sections(self, chunk_vectors: list[torch.Tensor]) -> EncodedSections:
        """From each section's chunk vectors `(C_p, H)` to section, chunk and attention maps."""
        n = len(chunk_vectors)
        section_out, chunk_out, maps = [], [], []
        for p, queries in enumerate(chunk_vectors):
            keyed = (
                chunk_vectors[p + 1] if p + 1 < n else chunk_vectors[p - 1] if n > 1 else queries
            )
            attended, weights = self.attention(
                queries[None],
                keyed[None],
                keyed[None],
                need_weights=True,
                average_attn_weights=True,
            )  # (1, C_p, H), (1, C_p, C_q)
            states, _ = self.lstm(torch.cat([queries, attended[0]], dim=-1)[None])  # (1, C_p, 2h)
            chunk_out.append(self.projection(states[0]))  # (C_p, D)
            section_out.append(self.projection(states[0].mean(0)))  # (D,)
            maps.append(weights[0])
        return EncodedSections(torch.stack(section_out), chunk_out, maps)

    def lone_sections(self, chunk_vectors: torch.Tensor) -> torch.Tensor:
        """Section vectors `(B, D)` of B one-section documents with k chunks each, `(B, k, H)`:
        `sections([x]).sections[0]` for every row at once (a lone section looks at itself)."""
        attended, _ = self.attention(
            chunk_vectors, chunk_vectors, chunk_vectors, need_weights=False
        )  # (B, k, H)
        states, _ = self.lstm(torch.cat([chunk_vectors, attended], dim=-1))  # (B, k, 2h)
        return self.projection(states.mean(dim=1))  # (B, D)

    def encode_sections(self, texts: list[str], max_chunks: int | None = None) -> EncodedSections:
        ids, section_of, position = [], [], []
        for p, text in enumerate(texts):
            chunks = self.chunk_ids(text, max_chunks)
            ids += chunks
            section_of += [p] * len(chunks)
            position += list(range(len(chunks)))
        vectors = self.encode_chunks(ids, section_of, position)  # (ΣC, H)
        per_section, at = [], 0
        for p in range(len(texts)):
            count = section_of.count(p)
            per_section.append(vectors[at : at + count])
            at += count
        return self.sections(per_section)

    # --- training ---------------------------------------------------------------------------
    def loss(self, batch: list[tuple[list[str], int]]) -> dict[str, torch.Tensor]:
        """`batch`: (section texts of one document, label) for each document."""
        views, labels = [], []
        for texts, label in batch:
            encoded = self.encode_sections(texts, max_chunks=self.TRAIN_CHUNKS)
            views.append(encoded.sections)
            labels += [label] * len(texts)
        z = torch.cat(views)  # (ΣS, D)
        labels_t = torch.tensor(labels, device=z.device)
        return {"supcon": supervised_contrastive_loss(z, labels_t, self.temperature)}


@dataclass
class SectionSampler:
    """Two (up to `views`) sections of each document; a one-section document is cut in half
    at a paragraph boundary. Labels: the document (self-supervised) or its class."""

    docs: list[list[str]]
    labels: list[int]
    batch_size: int
    views: int = 2

    @classmethod
    def from_corpus(
        cls, docs: list[TrainingDocument], batch_size: int, views: int, use_labels: bool
    ) -> SectionSampler:
        texts, labels, classes = [], [], {}
        for i, doc in enumerate(docs):
            sections = [t for t in doc.section_texts() if t.strip()]
            if len(sections) < 2:
                paragraphs = [" ".join(p) for p in doc.paragraphs()]
                if len(paragraphs) < 2:
                    continue
                half = len(paragraphs) // 2
                sections = [" ".join(paragraphs[:half]), " ".join(paragraphs[half:])]
            texts.append(sections)
            key = doc.label if use_labels and doc.label is not None else f"doc:{i}"
            labels.append(classes.setdefault(key, len(classes)))
        require_documents(len(texts), batch_size, "CoLDE (two sections or paragraphs each)")
        return cls(texts, labels, batch_size, views)

    def __call__(self, rng: random.Random) -> list[tuple[list[str], int]]:
        batch = []
        for d in rng.sample(range(len(self.docs)), self.batch_size):
            sections = self.docs[d]
            k = min(self.views, len(sections))
            picked = sorted(rng.sample(range(len(sections)), k))
            batch.append(([sections[i] for i in picked], self.labels[d]))
        return batch


def with_special_tokens(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[int]:
    """`[CLS] ids [SEP]` (or `<s> ids </s>`), as the tokenizer would add them."""
    first = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    last = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    return (
        [t for t in (first,) if t is not None] + list(ids) + [t for t in (last,) if t is not None]
    )


def normalized(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, dim=-1)


def from_base(base: Path, **options) -> ColdeModel:  # noqa: ANN003
    return ColdeModel(load_backbone(base), load_tokenizer(base), **options)


class ColdeEncoder:
    """CoLDE as an `Encoder`. The indexer's token chunks are CoLDE's chunks (the indexer
    packs them to `chunk_capacity` = the model's chunk size); a sentence or paragraph is
    encoded as a one-section document; paragraphs are the mean of their sentences."""

    def __init__(
        self,
        model: ColdeModel,
        *,
        name: str,
        source_dir: Path,
        device: str | torch.device = "cpu",
        precision: str = "auto",
        max_batch_size: int = 64,
        backend_dir: str | Path | None = None,
        streams: int = 1,
        **_: object,
    ) -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.amp_dtype = autocast_dtype(precision, self.device)
        self.name, self.source_dir, self.dim = name, source_dir, model.dim
        self.batch = max_batch_size
        self._identity = None
        self.backend: OpenVinoBackend | None = None  # None: the backbone runs on torch
        self.backend_record: dict[str, str] = {"name": TORCH}
        if backend_dir is not None:
            self.use_openvino(Path(backend_dir), streams=streams)

    # --- inference backend ------------------------------------------------------------------
    def use_openvino(self, directory: Path, *, streams: int = 1) -> None:
        """Run the backbone on the int8 OpenVINO export in `directory` (from
        `export_openvino_int8`); the embeddings, chunkwise attention, LSTM and projection stay
        on torch."""
        if self.device.type != "cpu":
            raise BackendUnavailableError(
                f"the {OPENVINO_INT8} backend runs on the CPU, not {self.device}"
            )
        # one request at a time here (the head needs each batch before the next): one stream
        # with every thread, as more streams would leave threads idle
        self.backend = OpenVinoBackend(directory, streams=1)
        self.backend_record = self.backend.record()
        self._identity = None
        if hasattr(self, "load_options"):  # set by `load_encoder`
            self.load_options = {**self.load_options, "backend_dir": str(directory)}

    def export_openvino_int8(self, texts: list[str], out_dir: Path) -> None:
        """Export the backbone to int8, calibrated on `texts` fed as `encode` feeds them."""
        all_ids = self.model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: len(all_ids[i]))
        samples = []
        with torch.inference_mode():
            for start in range(0, len(order), 16):
                chunks, _, position = self._text_chunks(all_ids, order[start : start + 16])
                embeds, mask = self.model.chunk_inputs(chunks, [0] * len(chunks), position)
                samples.append(
                    {"inputs_embeds": embeds.float().cpu(), "attention_mask": mask.cpu()}
                )
        export_openvino_int8_embeddings(self.model.backbone, samples, out_dir)

    def _backbone(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
        backend = self.backend
        if backend is None:
            return None
        return lambda embeds, mask: backend.infer(
            {"inputs_embeds": embeds.float().numpy(), "attention_mask": mask.numpy()}
        )

    def _text_chunks(
        self, all_ids: list[list[int]], part: list[int]
    ) -> tuple[list[list[int]], list[int], list[int]]:
        """The chunks of texts `part` (indices into `all_ids`), each text a one-section
        document: chunk ids, owning text, chunk position."""
        capacity = self.chunk_capacity
        chunks, owner, position = [], [], []
        for i in part:
            tokens = all_ids[i]
            pieces = [tokens[j : j + capacity] for j in range(0, max(len(tokens), 1), capacity)]
            for q, piece in enumerate(pieces[: self.model.max_chunks]):
                chunks.append(piece)
                owner.append(i)
                position.append(q)
        return chunks, owner, position

    @property
    def chunk_capacity(self) -> int:
        return self.model.max_tokens - self.model.tokenizer.num_special_tokens_to_add(pair=False)

    def identity(self) -> dict:
        if self._identity is None:
            from models.composite import composite_identity

            self._identity = {
                **composite_identity(self.source_dir, self.name, self.dim, self.model.max_tokens),
                "backend": dict(self.backend_record),
            }
        return dict(self._identity)

    def token_offsets(self, texts):  # noqa: ANN001, ANN201
        if not texts:
            return []
        encoded = self.model.tokenizer(
            list(texts), add_special_tokens=False, return_offsets_mapping=True
        )
        return [[(int(a), int(b)) for a, b in spans] for spans in encoded["offset_mapping"]]

    def encode(self, texts):  # noqa: ANN001, ANN201
        """Each text as a one-section document: `(n, dim)` unit vectors. Texts are batched
        by token length, so a batch pads little."""
        out = torch.empty(len(texts), self.dim)
        if not texts:
            return out
        all_ids = self.model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: len(all_ids[i]))
        with torch.inference_mode(), autocast(self.device, self.amp_dtype):
            for start in range(0, len(order), self.batch):
                part = order[start : start + self.batch]
                chunks, owner, position = self._text_chunks(all_ids, part)
                vectors = self.model.encode_chunks(
                    chunks, [0] * len(chunks), position, self._backbone()
                )
                # the head runs once per group of texts with the same number of chunks
                rows_of: dict[int, list[int]] = {}
                for k, i in enumerate(owner):
                    rows_of.setdefault(i, []).append(k)
                by_count: dict[int, list[int]] = {}
                for i in part:
                    by_count.setdefault(len(rows_of[i]), []).append(i)
                for group in by_count.values():
                    stacked = vectors[torch.tensor([rows_of[i] for i in group])]  # (B, k, H)
                    heads = self.model.lone_sections(stacked)  # (B, D)
                    out[torch.tensor(group)] = normalized(heads.float()).cpu()
        return out

    def encode_documents(self, documents, sentence_vectors=None):  # noqa: ANN001, ANN201
        from models.encoder import DocumentVectors
        from models.pooling import segment_mean

        if sentence_vectors is None:  # every document's sentences at once: fuller batches
            every = self.encode([s for doc in documents for s in doc.sentences])
            sentence_vectors = list(every.split([len(doc.sentences) for doc in documents]))
        out = []
        for i, doc in enumerate(documents):
            sentences = sentence_vectors[i]
            paragraphs = segment_mean(
                sentences, torch.as_tensor(doc.sentence_paragraph), doc.n_paragraphs
            )
            ids = self.model.tokenizer(list(doc.chunks), add_special_tokens=False)["input_ids"]
            capacity = self.chunk_capacity
            ids = [c[:capacity] for c in ids]
            position, counts = [], [0] * doc.n_sections
            for s in doc.chunk_section:
                position.append(counts[s])
                counts[s] += 1
            with torch.inference_mode(), autocast(self.device, self.amp_dtype):
                vectors = self.model.encode_chunks(
                    ids, list(doc.chunk_section), position, self._backbone()
                )
                per_section, at = [], 0
                for s in range(doc.n_sections):  # chunks come section by section
                    per_section.append(vectors[at : at + counts[s]])
                    at += counts[s]
                encoded = self.model.sections(per_section)
            section_states = encoded.sections.float().cpu()  # (S, d)
            sections = normalized(section_states)
            chunks = normalized(torch.cat(encoded.chunks).float().cpu())  # (C, d)
            attention = torch.zeros(len(doc.chunks), len(doc.chunks))  # (C, C)
            starts = [sum(counts[:s]) for s in range(doc.n_sections)]
            n = doc.n_sections
            for p, weights in enumerate(encoded.attention):
                q = p + 1 if p + 1 < n else p - 1 if n > 1 else p
                attention[starts[p] : starts[p] + counts[p], starts[q] : starts[q] + counts[q]] = (
                    weights.float().cpu()
                )
            out.append(
                DocumentVectors(
                    document=normalized(section_states.mean(0)),
                    sections=sections,
                    paragraphs=paragraphs,
                    sentences=sentences,
                    chunks=chunks,
                    chunk_attention=attention,
                )
            )
        return out
