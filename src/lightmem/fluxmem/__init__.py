"""FluxMem: memory as one evolving graph of semantic facts, episodes and skills."""

from lightmem.fluxmem.agent import FluxMemAgent, TaskExecutionError, TaskSession
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.reasoner import LLMReasoner, OfflineReasoner, Reasoner
from lightmem.fluxmem.stage3 import ConsolidationReport
from lightmem.fluxmem.types import (
    Edge,
    Feedback,
    Node,
    Repair,
    ScoredNode,
    StepResult,
    Subgraph,
    TaskOutcome,
)

__all__ = [
    "ConsolidationReport",
    "Edge",
    "Feedback",
    "FluxMemAgent",
    "FluxMemConfig",
    "LLMReasoner",
    "Node",
    "OfflineReasoner",
    "Reasoner",
    "Repair",
    "ScoredNode",
    "StepResult",
    "Subgraph",
    "TaskExecutionError",
    "TaskOutcome",
    "TaskSession",
]
