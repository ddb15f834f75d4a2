"""The claims table of the audit: one row per claim of the original reports, with what
was measured and the verdict (:class:`Claim`), rendered as a MyST table
(:func:`claims_markdown`)."""

from __future__ import annotations

import dataclasses

__all__ = ["CLAIM_VERDICTS", "MEASURED_HERE", "Claim", "decide", "claims_markdown"]

CLAIM_VERDICTS = ("holds", "fails", "cannot be tested here")
MEASURED_HERE = ("H100", "H200")  # the GPU models of data/runs; the reports' L4 is not one


def decide(verdict: str, needs=()) -> str:
    """The verdict a claim gets: ``verdict`` (what our evidence and arithmetic say), unless
    deciding the claim needs a measurement on a device we did not measure (``needs``: GPU
    models such as 'L4' or 'A100'), which makes it "cannot be tested here" whatever the
    reports' own evidence is worth (the audit chapter's rule)."""
    if verdict not in CLAIM_VERDICTS:
        raise ValueError(f"`verdict` must be one of {CLAIM_VERDICTS}; got {verdict!r}.")
    if isinstance(needs, str) or not all(isinstance(n, str) and n for n in needs):
        raise ValueError(f"`needs` must be a sequence of GPU model names; got {needs!r}.")
    return "cannot be tested here" if any(n not in MEASURED_HERE for n in needs) else verdict


@dataclasses.dataclass(frozen=True)
class Claim:
    """One audited claim: what was said, where, what we found, the verdict and evidence.

    ``verdict`` is one of :data:`CLAIM_VERDICTS`; ``evidence`` is a label of a section or
    figure of the book. Every field is a non-empty string (checked when built). ``needs``
    names the devices whose measurement would decide the claim; where one was not measured
    here the verdict becomes "cannot be tested here" (:func:`decide`).
    """

    claim: str
    source: str
    measured: str
    verdict: str
    why: str
    evidence: str
    needs: tuple = ()

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if f.name == "needs":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"`{f.name}` must be a non-empty string; got {value!r}.")
        object.__setattr__(self, "verdict", decide(self.verdict, tuple(self.needs)))


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
