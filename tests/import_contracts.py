"""An import-linter contract type the built-in ones lack: an allowlist.

``forbidden`` contracts list what a layer may not import, so a module nobody thought of
(``pathlib``, ``mmap``, ``datetime``) passes.  An ``allowlist`` contract turns that round:
every module of ``source_modules`` (and their descendants) may import only

- modules of ``source_modules`` themselves (a pure layer imports pure layers), and
- the modules named in ``allowed_modules`` and their descendants (``collections`` allows
  ``collections.abc``; ``skueue.core`` allows ``skueue.core.ops``, one pure layer another's).

``exempt_modules`` (each one module, not its descendants) are left out of the sources:
they get a contract of their own.
``lint-imports`` finds this class through ``contract_types`` in ``pyproject.toml``; it
runs from the checkout, which it puts on ``sys.path``.
"""

from __future__ import annotations

from typing import Any

import grimp
from importlinter import Contract, ContractCheck, fields, output


class AllowlistContract(Contract):
    type_name = "allowlist"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.StringField())
    exempt_modules = fields.ListField(subfield=fields.ModuleField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        sources = _with_descendants(graph, self._names("source_modules"))
        exempt = set(self._names("exempt_modules"))
        checked = sources - exempt
        allowed = set(self._names("allowed_modules"))
        illegal: list[dict[str, Any]] = []
        for importer in sorted(checked):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported in checked or _listed(imported, allowed):
                    continue
                lines = [d["line_number"] for d in graph.get_import_details(
                    importer=importer, imported=imported)]
                illegal.append({"importer": importer, "imported": imported, "lines": lines})
        return ContractCheck(kept=not illegal, warnings=[], metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        output.print_error("Imports outside the allowlist:", bold=False)
        output.new_line()
        for link in check.metadata["illegal"]:
            where = ", ".join(f"l.{n}" for n in link["lines"])
            output.print_error(f"- {link['importer']} -> {link['imported']} ({where})",
                               bold=False)
            output.new_line()

    def _names(self, field: str) -> list[str]:
        values = getattr(self, field, None) or []
        return [getattr(v, "name", v) for v in values]


def _listed(module: str, allowed: set[str]) -> bool:
    """``module`` or a package above it is in ``allowed``."""
    parts = module.split(".")
    return any(".".join(parts[:n]) in allowed for n in range(1, len(parts) + 1))


def _with_descendants(graph: grimp.ImportGraph, names: list[str]) -> set[str]:
    out: set[str] = set()
    for name in names:
        if name in graph.modules:
            out.add(name)
            out |= graph.find_descendants(name)
    return out
