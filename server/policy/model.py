"""The policy as immutable Python objects: what the loader builds and everything else reads."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from argwatch.server.policy.arg_paths import ArgPath, parse_path


class Mode(enum.Enum):
    """How a tool's problems are enforced."""

    OBSERVE = "observe"
    REJECT = "reject"


class Failure(enum.Enum):
    """What a check does when its value set cannot be read."""

    OPEN = "open"  # skip the check, let the call through, count it
    CLOSED = "closed"  # report a problem, so reject mode refuses the call


class OnStale(enum.Enum):
    """What a stale value set does to a rejecting check."""

    ENFORCE = "enforce"  # keep rejecting against the last good copy
    OBSERVE = "observe"  # judge the call in observe mode while the set is stale (counted)


class Disclosure(enum.Enum):
    """How much of a value set the model may be shown (repair messages, problems, tool definitions)."""

    LIST = "list"  # the whole set when it has at most repair.list_limit members, else the nearest few
    NEAREST = "nearest"  # only the few members nearest to the value given, never the whole set
    NONE = "none"  # no member, ever: none listed, suggested for a slip, or named as a replacement


class ValueLogging(enum.Enum):
    """How the decision log writes an argument's value: not at all, as a keyed digest, or as sent."""

    NONE = "none"
    HASHED = "hashed"
    CLEAR = "clear"


class CaseRule(enum.Enum):
    """How letter case counts when a value is normalised."""

    SENSITIVE = "sensitive"
    INSENSITIVE = "insensitive"


@dataclass(frozen=True, slots=True)
class Normalisation:
    """The formatting slips an argument's normalisation forgives."""

    case: CaseRule = CaseRule.INSENSITIVE
    # Characters treated as one and the same separator ("-", "_", " ", ".", "/").
    separators: str = "-_ ./"
    # Whether leading and trailing blanks are dropped.
    trim: bool = True


@dataclass(frozen=True, slots=True)
class ArgumentBinding:
    """One checked argument of a tool and the value set it must come from."""

    name: str  # the path as the policy writes it (`reason_code`, `items[*].sku`): its metric label
    value_set: str
    normalisation: Normalisation
    # Whether the path must be present to its end (in every element, for `[*]`): MISSING_REQUIRED where
    # it stops. The loader's default is the schema's say for a nested path, true for a top-level one.
    required: bool = True
    # What to tell the model to do when none of the legal values fits.
    hint: str = ""
    # The session field the set is scoped by (its ValueSetConfig.scope, copied at load); "" when global.
    scope: str = ""
    # A scoped set only: tell the model that a value belongs to another scope (`reveal_other_scopes: true`).
    # Off by default: "another customer's" and "does not exist" then read the same, so a model (and whoever
    # drives it) cannot probe which ids other customers hold.
    reveal_other_scopes: bool = False
    path: ArgPath = field(default=None, compare=False)  # type: ignore[assignment]  # parsed from name

    def __post_init__(self) -> None:
        if self.path is None:
            object.__setattr__(self, "path", parse_path(self.name))


@dataclass(frozen=True, slots=True)
class RecordBinding:
    """A record the tool's call names, looked up in the system of record; `record.<name>` in rules."""

    name: str
    source: str  # a gRPC source implementing argwatch.v1.RecordSource
    kind: str  # the RecordSource kind ("order")
    id_argument: str  # the path of the argument holding the id (`order_id`, `items[*].order_id`)
    # A record attribute that must equal the session's customer id (NOT_OWNED otherwise); "" for none.
    owner_attribute: str = ""
    failure: Failure = Failure.OPEN
    # The tool the model should call to find a real id, named in repair messages.
    lookup_tool: str = ""
    ttl_seconds: float = 30.0
    # Tell the model that a record exists but belongs to another customer (`reveal_not_owned: true`). Off by
    # default: NOT_OWNED then reads as NOT_FOUND towards the model (the counts still tell them apart).
    reveal_not_owned: bool = False
    # Whether a nested id path must be present to its end (the schema's say); a top-level id always must.
    required: bool = True
    id_path: ArgPath = field(default=None, compare=False)  # type: ignore[assignment]  # parsed from id_argument

    def __post_init__(self) -> None:
        if self.id_path is None and self.id_argument:
            object.__setattr__(self, "id_path", parse_path(self.id_argument))


# An argument path as steps: property names, and None for every element of an array (arg_paths.EVERY).
Steps = tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class ReadNode:
    """What a rule reads of one value: its JSON types (when read as a value), its fields, its elements."""

    kinds: tuple[str, ...] = ()
    fields: Mapping[str, ReadNode] = field(default_factory=dict)
    elements: ReadNode | None = None  # set for an array the rule walks


@dataclass(frozen=True, slots=True)
class ArrayReads:
    """What a rule reads through arrays (policy/rule_reads.py): typed at load, checked and bounded per call."""

    # `each: items[*]`: the rule runs once per element, bound as `item`, and a failure names that element.
    each: Steps = ()
    # Each element path it reads (items[*].quantity), with the JSON types its values may have.
    types: Mapping[Steps, tuple[str, ...]] = field(default_factory=dict)
    # The argument arrays it walks (items, items[*].tags) and the record lists (order.items): each is
    # checked to be a list, and one longer than limits.max_elements is not judged.
    walked: tuple[Steps, ...] = ()
    record_lists: tuple[Steps, ...] = ()
    # Whether it calls sum() (verdict/rule_functions.py), a function the gateway registers with CEL.
    sums: bool = False
    # Whether it uses map() or filter(), whose time grows with the square of the list: such a rule judges at
    # most MAX_SQUARE_ELEMENTS elements, whatever limits.max_elements allows (the rest as past the bound).
    squares: bool = False
    # The same reads as one tree per top-level argument: what a call's values are checked against, and
    # what of them CEL is handed (only the fields read: less to convert, nothing untyped to compare).
    plan: Mapping[str, ReadNode] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Rule:
    """A CEL expression over args, record and session that must hold."""

    name: str
    expression: str
    message: str  # a template: {args.amount_cents}, {record.order.paid_cents}, {session.customer_id}
    argument: str  # the argument a failure is reported on
    code: str  # out_of_range, not_owned or rule_failed
    program: Any = field(default=None, compare=False, repr=False)  # compiled once, at load
    # The record bindings it reads: it runs only when all of them were found.
    records: frozenset[str] = frozenset()
    # The argument fields it reads (args.<name>): only these are handed to CEL, whose
    # per-call conversion of its variables costs in proportion to their size.
    arguments: frozenset[str] = frozenset()
    # The same rule over plain variables (cel_flatten.py), and where each variable's value
    # comes from: (variable, (root, field, ...)). None where the rewrite does not apply.
    flat_program: Any = field(default=None, compare=False, repr=False)
    flat_paths: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The JSON types each argument the rule reads may have (from the schema, a value-set binding or the
    # rule's own `types:`): a value of another type is not compared (CEL compares across types, so
    # args.id != 12345 would pass "12345") but reported, as when the rule cannot be evaluated.
    argument_types: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    # When the rule cannot be evaluated on a call's values (a field absent or of another JSON type):
    # CLOSED reports RULE_NOT_EVALUATED (refused in reject mode); OPEN lists a skipped check, counted.
    on_error: Failure = Failure.CLOSED
    # What it reads through arrays, when it reads any (or calls sum()); None: a rule over scalars only.
    arrays: ArrayReads | None = None


@dataclass(frozen=True, slots=True)
class SideEffect:
    """A tool whose call changes something (a refund, a transfer): keys minted, repeats caught."""

    # The arguments that make two calls "the same operation" (order id and amount, never a
    # free-text note); empty: every argument the call carries.
    same_operation: tuple[str, ...] = ()
    # How long a call is remembered: a repeat within it is caught.
    window_seconds: float = 900.0
    # The tool that tells whether an earlier call took effect; named to the model, and a
    # call of it in the conversation lets the next repeat through as a retry. "" for none.
    status_tool: str = ""


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """The policy of one tool."""

    name: str
    mode: Mode
    arguments: tuple[ArgumentBinding, ...]
    description: str = ""
    # The arguments' JSON Schema (draft 2020-12), inline or from imported tool definitions; `true`
    # (any arguments) and `false` (no call is valid) are schemas too.
    schema: Mapping[str, Any] | bool | None = None
    # Whether the schema's `format` keywords are checked (2020-12 makes them annotations unless a
    # policy asks): the policy's `formats`, or the tool's own.
    assert_formats: bool = True
    # Its compiled validators, a verdict.schema_checks.CompiledSchema (read-only after load).
    schema_validator: Any = field(default=None, compare=False, repr=False)
    # Argument names the policy knows (bound ones and the schema's properties): only these
    # become metric labels; any other name the model writes is `_unknown`.
    known_arguments: frozenset[str] = frozenset()
    records: tuple[RecordBinding, ...] = ()
    rules: tuple[Rule, ...] = ()
    side_effect: SideEffect | None = None
    # `log_values`: how the decision log writes each named top-level argument; the rest as the policy's
    # `decision_log.values` says.
    log_values: Mapping[str, ValueLogging] = field(default_factory=dict)
    # Every check an override can name (policy/check_ids.py), worked out at load, off the event loop; empty
    # on a ToolPolicy built by hand, whose checks tool_checks works out when asked.
    check_names: frozenset[str] = field(default=frozenset(), compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class GrpcSourceConfig:
    """A ValueSetSource reached over gRPC."""

    target: str
    timeout_seconds: float = 1.0
    tls: bool = False
    # Subscribe to WatchValueSets (snapshot, deltas, heartbeats). False, or a
    # source that answers UNIMPLEMENTED, is pulled with GetValueSet every TTL/2.
    watch: bool = True


@dataclass(frozen=True, slots=True)
class FileSourceConfig:
    """Value sets read from a local YAML or JSON file."""

    path: str  # absolute, resolved against the policy file's folder at load


SourceConfig = GrpcSourceConfig | FileSourceConfig


@dataclass(frozen=True, slots=True)
class ValueSetConfig:
    """Where one value set comes from and how long a fetched copy is trusted."""

    name: str
    source: str
    # How long a confirmation counts as fresh; pulled sources are re-fetched every ttl/2.
    ttl_seconds: float
    failure: Failure
    # Past this age the last good copy is no longer used: the set is unavailable.
    max_staleness_seconds: float = 3600.0
    on_stale: OnStale = OnStale.ENFORCE
    # An update with more members is rejected as oversized.
    max_members: int = 5_000_000
    # What of the set a model (and whoever drives it) may be shown: internal handles and other
    # customers' ids are `none`, or every wrong guess would list or suggest some of them.
    disclose: Disclosure = Disclosure.LIST
    # The retired history kept (values once legal: why a miss reads `retired`): the newest this many,
    # and of those with a known retirement time, none older than retired_keep_seconds (None: no age).
    retired_keep: int = 10_000
    retired_keep_seconds: float | None = None
    # The session field whose value scopes the set (`customer_id` or `tenant`, SCOPE_FIELDS); "" for a global
    # set. A scoped set's owner publishes members per scope, and a call is judged against its own scope only.
    scope: str = ""


# The session fields a tool call carries (verdict/tool_call.py ToolCall), by which a value set may be scoped.
SCOPE_FIELDS = ("customer_id", "tenant")


@dataclass(frozen=True, slots=True)
class RepairConfig:
    """How Repair messages are built and when the model should give up."""

    # Sets with at most this many members are listed in full.
    list_limit: int = 50
    # Larger sets: this many nearest values, plus the total count.
    nearest: int = 5
    # Rejected attempts per conversation and tool before the model is told to stop.
    max_attempts: int = 3
    # How long a rejected call can still be repaired, and attempts remembered.
    remember_seconds: float = 900.0


# How many elements of one array a call may have checked (bindings and rules over `[*]`), by default.
DEFAULT_MAX_ELEMENTS = 256
# At most this many for a rule using map() or filter() (ArrayReads.squares), whatever the policy raises it to.
MAX_SQUARE_ELEMENTS = DEFAULT_MAX_ELEMENTS


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    """Bounds on the work one call's arguments can ask of the checks (the policy's `limits`)."""

    # Elements of one array checked per binding or rule; the rest are counted as not checked, never passed.
    max_elements: int = DEFAULT_MAX_ELEMENTS


@dataclass(frozen=True, slots=True)
class AttentionConfig:
    """What makes a row of the on-call screen ask for attention, beyond a set or a source in trouble."""

    # An argument's out-of-set rate above this (over at least min_checks checks in the window): the same
    # threshold as the shipped ArgwatchInventionRateHigh alert (deploy/prometheus/alerts.yaml); change both.
    out_of_set_rate: float = 0.03
    min_checks: int = 20
    # An on-call override expiring within this long: on-call should extend it or let it go on purpose.
    override_expiring_seconds: float = 600.0


# The label of a model or prompt version the policy does not declare, and of a call that named none.
OTHER_COHORT = "_other"
NO_COHORT = "_none"
MAX_COHORT_NAMES = 16  # per list: the split series are tools x arguments x (models + 2) x (versions + 2) x 3


@dataclass(frozen=True, slots=True)
class CohortConfig:
    """The models and prompt versions worth value-check series of their own (the policy's `models`).

    A caller names the model and prompt version of each call; as sent they are
    model-adjacent text of any length and number, so only these declared names
    become label values, and everything else is counted under OTHER_COHORT.
    """

    models: frozenset[str] = frozenset()
    prompt_versions: frozenset[str] = frozenset()

    @property
    def declared(self) -> bool:
        return bool(self.models or self.prompt_versions)

    def labels(self, model: str, prompt_version: str) -> tuple[str, str]:
        """The (model, prompt_version) label values for a call: declared, OTHER_COHORT or NO_COHORT."""
        return _cohort(model, self.models), _cohort(prompt_version, self.prompt_versions)


def _cohort(name: str, declared: frozenset[str]) -> str:
    if not name:
        return NO_COHORT
    return name if name in declared else OTHER_COHORT


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """How often an offending value is written to the sampled log."""

    rate: float = 0.02  # 1 in 50
    max_value_chars: int = 200
    # Argument names (in any tool) whose values are never written where people read them:
    # the sampled log and the Admin API's offending values show REDACTED instead.
    redact: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class DecisionLogConfig:
    """`decision_log`: how the decision log writes values the policy does not name per argument."""

    values: ValueLogging = ValueLogging.HASHED  # every argument a tool's `log_values` does not name
    session: ValueLogging = ValueLogging.HASHED  # the session's customer_id and tenant


@dataclass(frozen=True, slots=True)
class Policy:
    """A whole policy file, validated."""

    path: str
    version: str  # content hash, reported with every verdict
    default_mode: Mode
    # Read-only mappings (MappingProxyType), in the order the file gives them.
    tools: Mapping[str, ToolPolicy]
    sources: Mapping[str, SourceConfig]
    value_sets: Mapping[str, ValueSetConfig]
    repair: RepairConfig = field(default_factory=RepairConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    assert_formats: bool = True  # `formats: assert` (the default) or `annotate`; a tool may say otherwise
    cohorts: CohortConfig = field(default_factory=CohortConfig)  # `models`: value checks split by model
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    decision_log: DecisionLogConfig = field(default_factory=DecisionLogConfig)
