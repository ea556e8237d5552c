"""Write `.autonomous/context/*.json` as the Context Agent's Python writer does (not run by
`make test`).

The reference writer (`context_agent.py` on `harness_agent.py` of the autonomous-coding
harness that seed 004 documents) keeps four dataclasses with snake_case fields and writes each
file with `Path.write_text(json.dumps(asdict(value), indent=2))`: two spaces, `ensure_ascii`
(non-ASCII as `\\uXXXX`), no newline at the end. Its summary step estimates tokens as
`len(text) // 4`; when the estimate passes 2000 it cuts the content to 8,000 characters and
records `token_count` 2000. Its package could not be installed here, so this script declares
the same dataclasses (the same fields, in the same order) and calls the encoder the same way,
and follows the same summary step, on feature logs whose names are Chinese: the summary it
writes is 8,000 characters, counted 2000 by the writer and far more by cl100k_base.

    python tests/formats/generators/context_agent.py
"""

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GOLDEN_CONTEXT = Path(__file__).parents[1] / "golden" / "workspace" / ".autonomous" / "context"

SUMMARY_LIMIT_TOKENS = 2000
SUMMARY_CUT_CHARACTERS = 8000
# Fixed instants (epoch milliseconds), so that the files do not change from run to run.
NOW_MS = 1772438400000


@dataclass
class RunningSummary:
    content: str
    token_count: int
    updated_at: int
    trigger: str
    features_since_last_update: int
    total_features_completed: int


@dataclass
class KeyDecision:
    id: str
    feature_id: str
    decision: str
    rationale: str
    impact: list[str]
    timestamp: int
    category: str


@dataclass
class FailureRecord:
    id: str
    feature_id: str
    description: str
    root_cause: str
    resolution: str
    prevention: str
    timestamp: int
    severity: str


@dataclass
class ActiveConstraint:
    id: str
    description: str
    reason: str
    affected_areas: list[str]
    added_at: int
    expires_at: int | None
    type: str


def estimate_tokens(text: str) -> int:
    return len(text) // 4


def write_json_file(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def summarize(previous: str, feature_logs: dict[str, dict[str, str]]) -> RunningSummary:
    """The writer's summary step: the previous summary's start, a line per feature, and the
    cut at 8,000 characters when the estimate passes the limit."""
    parts = [f"## Previous State\n{previous[:500]}..."]
    parts.append(f"\n## Recent Updates ({len(feature_logs)} features)")
    for feature_id, log in feature_logs.items():
        parts.append(f"- {log.get('name', feature_id)}: {log.get('status', 'unknown')}")
    content = "\n".join(parts)
    token_count = estimate_tokens(content)
    if token_count > SUMMARY_LIMIT_TOKENS:
        content = content[:SUMMARY_CUT_CHARACTERS]
        token_count = SUMMARY_LIMIT_TOKENS
    return RunningSummary(
        content=content,
        token_count=token_count,
        updated_at=NOW_MS,
        trigger="category_complete",
        features_since_last_update=len(feature_logs),
        total_features_completed=23 + len(feature_logs),
    )


# Chinese feature names, varied so that cl100k_base counts them as real text.
_NAMES = [
    "用户注册与邮箱验证流程",
    "密码重置链接的有效期与一次性校验",
    "订单结算页面的库存锁定和超时释放",
    "支付回调的幂等处理及重复通知过滤",
    "商品搜索的分词、同义词与拼音纠错",
    "后台权限模型：角色、资源与审计日志",
    "消息推送的失败重试和退避策略",
    "数据库迁移时为非空列补充默认值",
]


_ROUND = "包含接口设计、单元测试和回归验证"


def main() -> None:
    previous = "项目概况：电商平台的账户、订单与支付模块已经完成第一阶段。" * 20
    feature_logs = {
        f"feat-{index:03d}": {
            "name": f"{_NAMES[index % len(_NAMES)]}（第{index}轮迭代，{_ROUND}）",
            "status": "已完成",
        }
        for index in range(200)
    }
    summary = summarize(previous, feature_logs)
    assert len(summary.content) == SUMMARY_CUT_CHARACTERS
    assert summary.token_count == SUMMARY_LIMIT_TOKENS
    decisions = [
        KeyDecision(
            id="dec-001",
            feature_id="feat-005",
            decision="使用 JWT 进行身份验证",
            rationale="Stateless auth simplifies scaling",
            impact=["All API endpoints must validate JWT", "会话保存在令牌中，而不是数据库"],
            timestamp=NOW_MS - 300000,
            category="architecture",
        ),
    ]
    failures = [
        FailureRecord(
            id="fail-001",
            feature_id="feat-012",
            description="Database migration failed in production",
            root_cause="Migration tried to add NOT NULL column without default",
            resolution="",
            prevention="Always include defaults for NOT NULL columns in migrations",
            timestamp=NOW_MS - 1800000,
            severity="high",
        ),
    ]
    constraints = [
        ActiveConstraint(
            id="con-001",
            description="Must support Node.js 18+",
            reason="Client requirement for production environment",
            affected_areas=["package.json", "CI/CD", "async/await patterns"],
            added_at=NOW_MS - 4800000,
            expires_at=None,
            type="technical",
        ),
    ]
    files: dict[str, Any] = {
        "running-summary.json": asdict(summary),
        "key-decisions.json": [asdict(d) for d in decisions],
        "failure-memory.json": [asdict(f) for f in failures],
        "active-constraints.json": [asdict(c) for c in constraints],
    }
    for name, data in files.items():
        write_json_file(GOLDEN_CONTEXT / name, data)
        print(GOLDEN_CONTEXT / name)


if __name__ == "__main__":
    main()
