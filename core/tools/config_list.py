"""``strom config list [SECTION]``: every supported config key with its type, default and doc.

The rows come from the definitions themselves, never from a copy: the broker's and a Connect
worker's pydantic models (field aliases are Kafka's names; a field without a description takes
Kafka's documentation of the key), the topic config table, the connector key tables, the
StreamsConfig model, MirrorMaker's connector ConfigDefs and the Spark options table.
``scripts/gen_config_docs.py`` writes docs/configuration.md from the same rows (:func:`markdown`).

Each section imports its runtime only when listed, so ``strom config list broker`` loads
neither Connect, Streams nor PySpark.
"""

from __future__ import annotations

import argparse
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True, slots=True)
class ConfigRow:
    """One key as listed: Kafka's name, type, default (as a string; "" when none) and doc."""

    name: str
    type: str
    default: str
    doc: str


def _text(value: Any) -> str:
    """A default as a properties file would spell it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _plain(doc: str) -> str:
    """Kafka's HTML documentation as one plain line."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", doc)).strip()


def first_sentence(doc: str) -> str:
    doc = _plain(doc)
    match = re.match(r"(.+?[^.][a-z0-9)]\.)(\s+[A-Z<]|$)", doc)  # not "e.g." nor "i.e."
    return match.group(1) if match else doc


def _type_name(annotation: Any) -> str:
    """Kafka's ConfigDef type of a pydantic field's annotation."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is Literal:
        return "STRING"
    simple: dict[Any, str] = {bool: "BOOLEAN", int: "INT", float: "DOUBLE", str: "STRING"}
    return simple.get(annotation, "CLASS" if annotation is Any else "STRING")


def _model_rows(model: type[BaseModel], docs: Callable[[str, FieldInfo], str],
                types_of: Mapping[str, str] | None = None, skip: Sequence[str] = ()) -> list[ConfigRow]:
    rows = []
    for name, field in model.model_fields.items():
        if name in skip or not field.alias:
            continue
        annotation = field.annotation
        kind = (types_of or {}).get(field.alias) or _type_name(annotation)
        if typing.get_origin(annotation) is Literal or any(
                typing.get_origin(a) is Literal for a in typing.get_args(annotation)):
            literal = annotation if typing.get_origin(annotation) is Literal else next(
                a for a in typing.get_args(annotation) if typing.get_origin(a) is Literal)
            doc = docs(field.alias, field)
            doc = f"{doc} One of: {', '.join(typing.get_args(literal))}.".strip()
        else:
            doc = docs(field.alias, field)
        default = "(required)" if field.is_required() else _text(field.get_default(call_default_factory=True))
        rows.append(ConfigRow(field.alias, kind, default, doc))
    return rows


# -- the sections -------------------------------------------------------------------------------

def broker_rows() -> list[ConfigRow]:
    from strom.core.config import BrokerConfig
    from strom.core.kafka_config_defs import BROKER_CONFIG_KEYS

    kafka = {k.name: k for k in BROKER_CONFIG_KEYS}

    def doc(key: str, field: FieldInfo) -> str:
        if field.description:
            return field.description
        return first_sentence(kafka[key].doc) if key in kafka else ""

    return _model_rows(BrokerConfig, doc, {k: v.type for k, v in kafka.items()})


def topic_rows() -> list[ConfigRow]:
    from strom.core.config import TOPIC_CONFIG_DEFS

    return [ConfigRow(d.name, d.type, _text(d.default), d.doc + (f" Broker default: {d.synonym}." if d.synonym else ""))
            for d in TOPIC_CONFIG_DEFS]


def connect_worker_rows() -> list[ConfigRow]:
    from strom.connect.runtime.config import KAFKA_WORKER_DOCS, WorkerConfig

    rows = _model_rows(WorkerConfig, lambda key, field: field.description or KAFKA_WORKER_DOCS.get(key, ""))
    rows += [ConfigRow(f"{p}*", "STRING", "", f"Settings of the worker's {p[:-1]} clients (Kafka's names).")
             for p in ("producer.", "consumer.", "admin.")]
    return rows


def connector_rows() -> list[ConfigRow]:
    from strom.connect.runtime.config import COMMON_KEYS, NO_DEFAULT, SINK_KEYS, SOURCE_KEYS

    rows = []
    for tag, keys in (("", COMMON_KEYS), ("Sink connectors: ", SINK_KEYS), ("Source connectors: ", SOURCE_KEYS)):
        for key in keys:
            default = "(required)" if key.default is NO_DEFAULT else _text(key.default)
            valid = f" One of: {', '.join(key.valid)}." if key.valid else ""
            rows.append(ConfigRow(key.name, key.type, default, tag + key.doc + valid))
    rows += [ConfigRow("transforms.<alias>.*", "STRING", "", "A transformation's type and its own keys."),
             ConfigRow("predicates.<alias>.*", "STRING", "", "A predicate's type and its own keys."),
             ConfigRow("producer.override.*", "STRING", "", "Settings of a source connector's producer."),
             ConfigRow("consumer.override.*", "STRING", "", "Settings of a sink connector's consumer.")]
    return rows


def streams_rows() -> list[ConfigRow]:
    from strom.streams.runtime.config import STREAMS_DOCS, StreamsConfig

    rows = _model_rows(StreamsConfig, lambda key, field: field.description or STREAMS_DOCS.get(key, ""),
                       skip=("consumer", "producer", "admin"))
    rows += [ConfigRow(f"{p}.*", "STRING", "", f"Settings of the application's {p} clients (librdkafka's "
                                               "names; Kafka's security keys are translated).")
             for p in ("consumer", "producer", "admin")]
    return rows


def mirror_maker_rows() -> list[ConfigRow]:
    from strom.connect.api.config import NO_DEFAULT
    from strom.connect.mirror.config import CHECKPOINT_CONFIG_DEF, HEARTBEAT_CONFIG_DEF, SOURCE_CONFIG_DEF

    rows = [ConfigRow("clusters", "LIST", "(required)", "Aliases of the clusters MirrorMaker connects."),
            ConfigRow("<alias>.*", "STRING", "", "Settings of one cluster's clients and worker "
                                                 "(<alias>.bootstrap.servers is required)."),
            ConfigRow("<source>-><target>.*", "STRING", "", "Settings of one replication flow "
                                                            "(<source>-><target>.enabled=true turns it on).")]
    seen: set[str] = set()
    for cdef in (SOURCE_CONFIG_DEF, CHECKPOINT_CONFIG_DEF, HEARTBEAT_CONFIG_DEF):
        for key in cdef.config_keys.values():
            if key.name in seen or key.internal:
                continue
            seen.add(key.name)
            default = "(required)" if key.default is NO_DEFAULT else _text(key.default)
            rows.append(ConfigRow(key.name, key.type.value, default, first_sentence(key.doc)))
    return rows


def spark_rows() -> list[ConfigRow]:
    from strom.spark_bridge.options import OPTION_DOCS

    return [ConfigRow(name, kind.upper(), default, doc) for name, (kind, default, doc) in OPTION_DOCS.items()]


SECTIONS: dict[str, tuple[str, Callable[[], list[ConfigRow]]]] = {
    "broker": ("Broker (server.properties, `--override`, STROM_* variables)", broker_rows),
    "topic": ("Topic configs (CreateTopics, AlterConfigs, `strom topics create --config`)", topic_rows),
    "connect-worker": ("Connect worker (worker.properties)", connect_worker_rows),
    "connector": ("Connector configs (the framework's keys; each connector adds its own)", connector_rows),
    "streams": ("Streams (the config of KafkaStreams)", streams_rows),
    "mirror-maker": ("MirrorMaker 2 (mm2.properties)", mirror_maker_rows),
    "spark": ("Spark data source options (`spark.read.format(\"kafka\")`)", spark_rows),
}


# -- output ------------------------------------------------------------------------------------

def text(section: str) -> str:
    """One section as aligned columns: KEY TYPE DEFAULT DOC."""
    rows = SECTIONS[section][1]()
    header = ConfigRow("KEY", "TYPE", "DEFAULT", "DOC")
    # long defaults (LONG_MAX, class names) would push every doc far right: they wrap the column
    width = [min(max(len(getattr(r, f)) for r in [header, *rows]), 44) for f in ("name", "type")]
    dwidth = min(max(len(r.default) for r in [header, *rows]), 24)
    lines = []
    for r in [header, *rows]:
        lines.append(f"{r.name:<{width[0]}}  {r.type:<{width[1]}}  {r.default:<{dwidth}}  {r.doc}".rstrip())
    return "\n".join(lines)


def _pipe(value: str) -> str:
    return value.replace("|", "\\|")


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;") if value else ""


def markdown(section: str) -> str:
    """One section as a Markdown table (docs/configuration.md)."""
    title, rows_of = SECTIONS[section]
    out = [f"## {section}", "", title + ".", "", "| Key | Type | Default | Description |", "|---|---|---|---|"]
    for r in rows_of():
        default = f"`{_pipe(r.default)}`" if r.default else ""
        # code spans show < > as written: only the table's own | needs escaping there
        out.append(f"| `{_pipe(r.name)}` | {r.type} | {default} | {_cell(r.doc)} |")
    return "\n".join(out) + "\n"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "config", help="list every supported config key (strom config list [SECTION])",
        description="Show what strom's configurations accept, generated from their definitions.")
    sub = p.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    lp = sub.add_parser(
        "list", help="every supported key with its type, default and doc",
        description="Print every supported config key of a section (default: all sections) with its "
                    "type, default and documentation. docs/configuration.md is the same list.")
    lp.add_argument("section", nargs="?", choices=list(SECTIONS), metavar="SECTION",
                    help="one of: " + ", ".join(SECTIONS) + " (default: all)")
    lp.add_argument("--format", choices=("text", "markdown"), default="text", help="output format (default: text)")
    lp.set_defaults(func=cmd_config_list)


def cmd_config_list(args: argparse.Namespace) -> int:
    sections = [args.section] if args.section else list(SECTIONS)
    render = markdown if args.format == "markdown" else text
    parts = []
    for section in sections:
        body = render(section)
        parts.append(body if args.format == "markdown" or len(sections) == 1 else f"# {section}\n{body}\n")
    print("\n".join(parts).rstrip())
    return 0
