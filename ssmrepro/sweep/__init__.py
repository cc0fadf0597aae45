"""Stage 2 (sweep): spec + profile -> validated ``RunConfig`` list (``expand``), run ids."""

from .config import (
    CODE_VERSION,
    MEMBER_FIELDS,
    EarlyStop,
    RunConfig,
    Schedule,
    TrainConfig,
    flatten,
    lean,
    per_point,
    run_id_of,
    swept_keys,
)
from .expand import (
    SECTIONS,
    axis_points,
    config_identity,
    effective_overrides,
    expand,
    layer_spelling_problems,
    may_plan,
    overrides_tag,
    overrides_text,
    parse_config,
    parse_overrides,
    parsed_identity,
    set_dotted,
    unique_runs,
    unswept_overrides,
    validate_sections,
)

__all__ = ["CODE_VERSION", "MEMBER_FIELDS", "SECTIONS", "EarlyStop", "RunConfig", "Schedule",
           "TrainConfig", "axis_points", "config_identity", "effective_overrides",
           "expand", "flatten", "layer_spelling_problems", "lean", "may_plan", "overrides_tag",
           "overrides_text",
           "parse_config", "parse_overrides", "parsed_identity", "per_point", "run_id_of", "set_dotted",
           "swept_keys", "unique_runs", "unswept_overrides", "validate_sections"]
