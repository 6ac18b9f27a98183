"""The base of every encoder's architecture config: a frozen dataclass that goes to and comes
from JSON (`config.json` beside the weights), refusing keys it does not know."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Self


@dataclass(frozen=True)
class ModelConfig:
    """Architecture hyperparameters; subclasses are frozen dataclasses with defaults.

    Runtime knobs (device, precision, batch sizes) never belong here: they come from the
    caller's settings.
    """

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Self:
        """The config saved as `values` (defaults for the keys it lacks).

        Raises:
            ValueError: `values` holds a key that is not a field of this config.
        """
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(
                f"Unknown {cls.__name__} keys {unknown}. Valid keys are: {sorted(names)}."
            )
        return cls(**values)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], **fixed: Any) -> Self:
        """The config from a training run's `options` that name its fields (None, or a key
        of another part of the run, is left out: the field keeps its default, defined here
        once), with `fixed` fields over them."""
        names = {f.name for f in fields(cls)}
        given = {k: v for k, v in options.items() if k in names and v is not None}
        return cls(**{**given, **fixed})
