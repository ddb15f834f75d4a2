"""The claims table of the audit: one row per claim of the original reports, with what
was measured and the verdict (:class:`Claim`), rendered as a MyST table
(:func:`claims_markdown`)."""

from __future__ import annotations

import dataclasses

__all__ = ["CLAIM_VERDICTS", "GROUNDS", "MEASURED_HERE", "Claim", "decide",
           "verdict_cell", "claims_markdown"]

CLAIM_VERDICTS = ("holds", "fails", "cannot be tested here")
MEASURED_HERE = ("H100", "H200")  # the GPU models of data/runs; the reports' L4 is not one
# What a verdict rests on: "arithmetic" (the claim's own numbers, a datasheet or its logic
# refute or support it, on any GPU) or "measurement" (a timing decides it, so only on the
# GPU it is about).
GROUNDS = ("arithmetic", "measurement")


def decide(verdict: str, needs, ground: str) -> str:
    """The verdict a claim gets (the audit chapter's rule): ``verdict`` (what our evidence
    and arithmetic say), unless the claim is about a device we did not measure (``needs``:
    GPU models such as 'L4' or 'A100') *and* deciding it needs a measurement there
    (``ground`` "measurement"): then "cannot be tested here". A claim that its own
    arithmetic refutes (``ground`` "arithmetic") keeps its verdict on any device: a wrong
    byte count is wrong without an L4. ``needs`` and ``ground`` have no default, so no
    claim about the L4 is decided by omission."""
    if verdict not in CLAIM_VERDICTS:
        raise ValueError(f"`verdict` must be one of {CLAIM_VERDICTS}; got {verdict!r}.")
    if (isinstance(needs, str) or not isinstance(needs, (tuple, list))
            or not all(isinstance(n, str) and n for n in needs)):
        raise ValueError(f"`needs` must be a sequence of GPU model names; got {needs!r}.")
    if ground not in GROUNDS:
        raise ValueError(f"`ground` must be one of {GROUNDS}; got {ground!r}.")
    unmeasured = any(n not in MEASURED_HERE for n in needs)
    return "cannot be tested here" if unmeasured and ground == "measurement" else verdict


def verdict_cell(verdict: str, needs, ground: str) -> str:
    """The verdict as the claims table shows it: ``verdict``, with "(arithmetic)" where a
    claim about an unmeasured device is decided by its own arithmetic, so that a reader
    sees why an L4 claim is decided without an L4."""
    unmeasured = any(n not in MEASURED_HERE for n in needs)
    return f"{verdict} (arithmetic)" if unmeasured and ground == "arithmetic" else verdict


@dataclasses.dataclass(frozen=True)
class Claim:
    """One audited claim: what was said, where, what we found, the verdict and evidence.

    ``verdict`` is one of :data:`CLAIM_VERDICTS`; ``evidence`` is a label of a section or
    figure of the book. Every field is a non-empty string (checked when built). ``needs``
    names the devices the claim is about (() for a claim about method or statistics), and
    ``ground`` what decides it (:data:`GROUNDS`); both are required, and :func:`decide`
    turns the verdict into "cannot be tested here" where a measurement on an unmeasured
    device would be needed.
    """

    claim: str
    source: str
    measured: str
    verdict: str
    why: str
    evidence: str
    needs: tuple = None
    ground: str = None

    def __post_init__(self):
        if self.needs is None or self.ground is None:
            raise ValueError("`needs` and `ground` must be given: the devices the claim is "
                             "about and what decides it (claim_table.decide).")
        for f in dataclasses.fields(self):
            if f.name in ("needs", "ground"):
                continue
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"`{f.name}` must be a non-empty string; got {value!r}.")
        object.__setattr__(self, "needs", tuple(self.needs) if isinstance(self.needs, list)
                           else self.needs)
        object.__setattr__(self, "verdict", decide(self.verdict, self.needs, self.ground))

    @property
    def cell(self) -> str:
        """The verdict as the claims table shows it (:func:`verdict_cell`)."""
        return verdict_cell(self.verdict, self.needs, self.ground)


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
                     f"**{c.cell}**: {cell(c.why)} | {{ref}}`{c.evidence}` |")
    return "\n".join(lines)
