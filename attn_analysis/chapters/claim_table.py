"""The claims table of the audit: one row per claim of the original reports, with what
was measured and the verdict (:class:`Claim`), rendered as a MyST table
(:func:`claims_markdown`)."""

from __future__ import annotations

import dataclasses

__all__ = ["CLAIM_VERDICTS", "Claim", "claims_markdown"]

CLAIM_VERDICTS = ("holds", "fails", "cannot be tested here")


@dataclasses.dataclass(frozen=True)
class Claim:
    """One audited claim: what was said, where, what we found, the verdict and evidence.

    ``verdict`` is one of :data:`CLAIM_VERDICTS`; ``evidence`` is a label of a section or
    figure of the book. Every field is a non-empty string (checked when built).
    """

    claim: str
    source: str
    measured: str
    verdict: str
    why: str
    evidence: str

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"`{f.name}` must be a non-empty string; got {value!r}.")
        if self.verdict not in CLAIM_VERDICTS:
            raise ValueError(f"`verdict` must be one of {CLAIM_VERDICTS}; "
                             f"got {self.verdict!r}.")


def claims_markdown(claims) -> str:
    """A MyST table of ``claims`` (:class:`Claim`), the evidence column as ``{ref}`` links."""
    claims = list(claims)
    if not claims or not all(isinstance(c, Claim) for c in claims):
        raise ValueError("`claims` must be a non-empty sequence of Claim.")

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")
    lines = ["| # | claim | source | what we measured or computed | verdict | evidence |",
             "| --- | --- | --- | --- | --- | --- |"]
    for i, c in enumerate(claims, 1):
        lines.append(f"| {i} | {cell(c.claim)} | {cell(c.source)} | {cell(c.measured)} | "
                     f"**{c.verdict}**: {cell(c.why)} | {{ref}}`{c.evidence}` |")
    return "\n".join(lines)
