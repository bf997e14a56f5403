"""What hacrl_exp/rollout/vllm.py asks of vLLM, read from its source with `ast`, and the installed vLLM's answer,
read from vLLM's own source with `ast` too: no vLLM module is imported (its compiled parts need CUDA and its
dependencies), so the check runs wherever the wheel is unpacked (tests/rollout/test_vllm_contract.py).

`uses(tree)` lists every use of vLLM in a module of ours:
  - `vllm.X(...)` (the module as `vllm` or `self._vllm`): a class, its keyword arguments (through `**f(...)` too,
    f a function of the module that builds its dict with `dict(k=...)`, `{"k": ...}`, `.update(k=...)` or
    `d["k"] = ...`) and the literal values of some (`VALUES`);
  - `llm.m(...)` / `self.llm.m(...)`: a method of vllm.LLM and its keywords;
  - in a function given to `apply_model`, a method called on the engine's model (checked on every architecture
    our agents build, `ARCHITECTURES`);
  - the keys of the prompt dicts (`tokens_prompts`, vllm.TokensPrompt), the wake-up tags (`_wake`), and the
    attributes read from vllm.RequestOutput / vllm.CompletionOutput in `rollouts_from_outputs`.
A `**` it cannot resolve is an error, so a new call cannot slip past.
`VLLMSource(root).problems(uses)` names each use the installed vLLM does not accept.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

MODULE_ROOTS = ("vllm", "self._vllm")
"""How our code names the vllm module (rollout.vllm.require_vllm returns it)."""
ENGINE_ROOTS = ("llm", "self.llm")
"""How it names its vllm.LLM."""
OUTPUT_NAMES = {"output": "RequestOutput", "completion": "CompletionOutput", "c": "CompletionOutput"}
"""rollouts_from_outputs' names for vLLM's outputs."""
ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "OPTForCausalLM", "GPT2LMHeadModel")
"""The model classes our agents are (agents.model_shapes families), whose vLLM models must load weights."""
VALUES = {
    "distributed_executor_backend": ("vllm.config.parallel", "DistributedExecutorBackend"),
    "load_format": ("vllm.model_executor.model_loader", "LoadFormats"),
}
"""Keyword arguments whose literal values must be among a Literal alias of vLLM's."""
REQUIRED = (("SamplingParams", "seed"),)
"""Used by the project's sampler contract (a per-request seed, issue 36) even where this module does not pass it yet."""


@dataclass
class Use:
    """One use of vLLM: kind class | method | model | prompt | tag | output; `name` the class, method, key or tag
    (`owner.name` for outputs); keywords with their literal values (None when not a literal)."""

    kind: str
    name: str
    line: int
    keywords: dict[str, object] = field(default_factory=dict)
    positional: int = 0


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _dict_keys(function: ast.FunctionDef) -> dict[str, object]:
    """Keys (and literal values) of the dicts `function` builds."""
    keys: dict[str, object] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in ("dict", "update"):
            keys.update({k.arg: _literal(k.value) for k in node.keywords if k.arg})
        elif isinstance(node, ast.Dict):
            keys.update({k.value: _literal(v) for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)})
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            key = node.targets[0].slice
            if isinstance(key, ast.Constant):
                keys[key.value] = _literal(node.value)
    return keys


def _keywords(call: ast.Call, functions: dict[str, ast.FunctionDef], assigned: dict[str, ast.AST]) -> dict:
    out: dict[str, object] = {}
    for keyword in call.keywords:
        if keyword.arg is not None:
            out[keyword.arg] = _literal(keyword.value)
            continue
        name = _dotted(keyword.value)
        value = assigned.get(name, keyword.value) if name else keyword.value  # **name: what was assigned to it
        builder = _dotted(value.func).split(".")[-1] if isinstance(value, ast.Call) else ""
        if builder not in functions:
            raise ValueError(f"line {call.lineno}: cannot resolve **{ast.unparse(keyword.value)}")
        out.update(_dict_keys(functions[builder]))
    return out


def uses(tree: ast.Module) -> list[Use]:
    """Every use of vLLM in `tree` (module docstring)."""
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    found: list[Use] = []
    for function in functions.values():
        assigned = {_dotted(n.targets[0]): n.value for n in ast.walk(function) if isinstance(n, ast.Assign)}
        for node in ast.walk(function):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            root, name = _dotted(node.func.value), node.func.attr
            kind = "class" if root in MODULE_ROOTS else "method" if root in ENGINE_ROOTS else None
            if kind:
                found.append(Use(kind, name, node.lineno, _keywords(node, functions, assigned), len(node.args)))
            if kind == "method" and name == "apply_model" and node.args and isinstance(node.args[0], ast.Lambda):
                model = node.args[0].args.args[0].arg
                for call in ast.walk(node.args[0].body):
                    if isinstance(call, ast.Call) and _dotted(call.func).startswith(f"{model}."):
                        found.append(Use("model", call.func.attr, call.lineno, positional=len(call.args)))
            if name == "_wake" and _dotted(node.func.value) == "self":
                found.extend(Use("tag", a.value, node.lineno) for a in node.args if isinstance(a, ast.Constant))
    prompts = functions.get("tokens_prompts")
    if prompts is not None:
        found.extend(Use("prompt", key, prompts.lineno) for key in _dict_keys(prompts))
    if "rollouts_from_outputs" in functions:
        for node in ast.walk(functions["rollouts_from_outputs"]):
            if isinstance(node, ast.Attribute) and _dotted(node.value) in OUTPUT_NAMES:
                found.append(Use("output", f"{OUTPUT_NAMES[_dotted(node.value)]}.{node.attr}", node.lineno))
    return found


class VLLMSource:
    """The installed vLLM's source under `root` (the folder of vllm/__init__.py), read with ast, never imported."""

    def __init__(self, root: Path) -> None:
        self.root, self._trees = root, {}

    def module(self, dotted: str) -> ast.Module:
        if dotted not in self._trees:
            path = self.root.joinpath(*dotted.split(".")[1:])
            path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
            self._trees[dotted] = ast.parse(path.read_text(encoding="utf-8"))
        return self._trees[dotted]

    def export(self, name: str) -> tuple[str, str]:
        """(module, class) behind `vllm.<name>`, from vllm/__init__.py's lazy MODULE_ATTRS table."""
        for node in self.module("vllm").body:
            if isinstance(node, ast.Assign) and _dotted(node.targets[0]) == "MODULE_ATTRS":
                table = ast.literal_eval(node.value)
                if name not in table:
                    raise KeyError(f"vllm.{name} is not exported")
                module, attr = table[name].split(":")
                return "vllm" + module, attr
        raise KeyError("vllm/__init__.py has no MODULE_ATTRS")

    def find_class(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef]:
        """The class `name` as `module` defines or imports it (following `from ... import name`)."""
        for node in self.module(module).body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
        for node in ast.walk(self.module(module)):
            if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names) and depth < 5:
                base = module if self._is_package(module) else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                source = node.module if not node.level else ".".join(p for p in (base, node.module) if p)
                return self.find_class(source, name, depth + 1)
        raise KeyError(f"no class {name} in {module}")

    def _is_package(self, module: str) -> bool:
        return self.root.joinpath(*module.split(".")[1:]).is_dir()

    def _bases(self, module: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        out = [(module, cls)]
        for base in cls.bases:
            try:
                out += self._bases(*self.find_class(module, _dotted(base).split(".")[-1]))
            except (KeyError, FileNotFoundError):
                pass  # a base outside vLLM (msgspec.Struct, TypedDict, nn.Module)
        return out

    def method(self, module: str, cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
        for _, klass in self._bases(module, cls):
            for node in klass.body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return node
        return None

    def fields(self, module: str, cls: ast.ClassDef) -> set[str]:
        """Annotated class attributes (dataclass, msgspec.Struct and TypedDict fields), bases included."""
        return {
            node.target.id
            for _, klass in self._bases(module, cls)
            for node in klass.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        }

    def attributes(self, module: str, cls: ast.ClassDef) -> set[str]:
        """What an instance has: fields, methods and every `self.x = ...` of its methods."""
        out = self.fields(module, cls)
        for _, klass in self._bases(module, cls):
            for node in ast.walk(klass):
                if isinstance(node, ast.FunctionDef):
                    out.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    out |= {t.attr for t in targets if isinstance(t, ast.Attribute) and _dotted(t.value) == "self"}
        return out

    def literal_values(self, module: str, alias: str) -> set[str]:
        for node in self.module(module).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if _dotted(target) == alias and isinstance(node.value, ast.Subscript):
                return {e.value for e in ast.walk(node.value.slice) if isinstance(e, ast.Constant)}
        raise KeyError(f"no Literal alias {alias} in {module}")

    def accepted(self, function: ast.FunctionDef | None, cls: tuple[str, ast.ClassDef]) -> tuple[set, int, bool]:
        """(keyword names, positional slots beyond self, takes **kwargs) of a method; for a class without its own
        __init__ (dataclass, msgspec.Struct) its fields."""
        if function is None:
            return self.fields(*cls), 0, False
        args = function.args
        positional = [a.arg for a in args.posonlyargs + args.args][1:]
        names = {a.arg for a in args.args + args.kwonlyargs}
        return names, len(positional) if args.vararg is None else 10**6, args.kwarg is not None

    def llm(self) -> tuple[str, ast.ClassDef]:
        return self.find_class(*self.export("LLM"))

    def engine_keywords(self) -> set[str]:
        """What vllm.LLM(...) accepts: its own parameters and, through **kwargs, EngineArgs' fields."""
        cls = self.llm()
        names, _, varkw = self.accepted(self.method(*cls, "__init__"), cls)
        return names | (self.fields(*self.find_class(*self.export("EngineArgs"))) if varkw else set())

    def problems(self, found: list[Use]) -> list[str]:
        """One line per use the installed vLLM does not accept."""
        out = []
        for use in found:
            where = f"line {use.line}: "
            try:
                out += [where + p for p in self._check(use)]
            except KeyError as missing:
                out.append(where + str(missing).strip("'\""))
        return out

    def _check(self, use: Use) -> list[str]:
        out = []
        if use.kind in ("class", "method"):
            cls = self.find_class(*self.export(use.name)) if use.kind == "class" else self.llm()
            init = self.method(*cls, "__init__" if use.kind == "class" else use.name)
            if use.kind == "method" and init is None:
                return [f"vllm.LLM has no method {use.name}"]
            names, positional, varkw = self.accepted(init, cls)
            if use.kind == "class" and use.name == "LLM":
                names, varkw = self.engine_keywords(), False
            label = f"vllm.{use.name}" if use.kind == "class" else f"vllm.LLM.{use.name}"
            out += [f"{label}() takes no keyword {k!r}" for k in use.keywords if not varkw and k not in names]
            if use.positional > positional:
                out.append(f"{label}() takes {positional} positional arguments, {use.positional} given")
            for key, (module, alias) in VALUES.items():
                value = use.keywords.get(key)
                if value is not None and value not in self.literal_values(module, alias):
                    out.append(f"{label}({key}={value!r}): not one of vLLM's {alias}")
        elif use.kind == "model":
            registry = self._registry()
            for arch in ARCHITECTURES:
                if arch not in registry:
                    out.append(f"vLLM has no model for architecture {arch}")
                    continue
                module, name = registry[arch]
                cls = self.find_class(f"vllm.model_executor.models.{module}", name)
                if self.method(*cls, use.name) is None:
                    out.append(f"vLLM's {name} has no method {use.name}")
        elif use.kind == "prompt":
            if use.name not in self.fields(*self.find_class(*self.export("TokensPrompt"))):
                out.append(f"vllm.TokensPrompt has no key {use.name!r}")
        elif use.kind == "tag":
            worker = self.module("vllm.v1.worker.gpu_worker")
            if use.name not in {n.value for n in ast.walk(worker) if isinstance(n, ast.Constant)}:
                out.append(f"vLLM's GPU worker knows no sleep/wake-up tag {use.name!r}")
        elif use.kind == "output":
            owner, attr = use.name.split(".")
            if attr not in self.attributes(*self.find_class(*self.export(owner))):
                out.append(f"vllm.{owner} has no attribute {attr!r}")
        return out

    def _registry(self) -> dict[str, tuple[str, str]]:
        """vLLM's text-generation architectures: name → (models module, class)."""
        for node in self.module("vllm.model_executor.models.registry").body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if _dotted(target) == "_TEXT_GENERATION_MODELS":
                return {k: v for k, v in ast.literal_eval(node.value).items()}
        raise KeyError("vLLM's model registry has no _TEXT_GENERATION_MODELS")
