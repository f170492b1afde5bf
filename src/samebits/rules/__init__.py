"""The rule registry shared by ``samebits lint`` (static) and ``samebits doctor`` (runtime).

A rule is a code (``SB1xx`` reproducibility, ``SB2xx`` performance, ``SB3xx`` memory, ``SB4xx``
safety), a kebab-case name, a one-line message, and docs: what it does, why it matters, an
example and the fix. A static rule also says here whether ``samebits lint --fix`` fixes it and
how (``autofix``), or why not (``no_autofix``); the code of each fix sits beside its check in
``linter/checks/`` (a test keeps the two in step). ``--explain`` and ``docs/rules.md`` are both
rendered from here.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Literal

from samebits.rules.causes import fix_of, sentence

CATEGORIES = {"1": "reproducibility", "2": "performance", "3": "memory", "4": "safety"}


@dataclasses.dataclass(frozen=True)
class Rule:
    code: str
    name: str
    kind: Literal["static", "runtime"]
    message: str
    what: str
    why: str
    example: str
    fix: str
    limits: str = ""  # what a static rule knows and does not (the "Known limits" section)
    autofix: str = ""  # what `samebits lint --fix` does for a static rule; "" where it has no fix
    no_autofix: str = ""  # why a static rule has no automatic fix
    torchfix: str = ""  # TorchFix's code for the same mistake (a noqa comment naming it silences this rule too)

    @property
    def category(self) -> str:
        return CATEGORIES[self.code[2]]

    def explain(self) -> str:
        """The rule's documentation as Markdown (the ``--explain`` text and a section of docs/rules.md)."""
        return "\n".join(
            [
                f"## {self.code} `{self.name}` ({self.category}, {self.kind})",
                "",
                f"{self.message}",
                "",
                "**What it does.** " + self.what,
                "",
                "**Why is this bad.** " + self.why,
                "",
                "**Example**",
                "",
                "```python",
                textwrap.dedent(self.example).strip(),
                "```",
                "",
                "**Use instead.** " + self.fix,
                "",
                *(["**Known limits.** " + self.limits, ""] if self.limits else []),
                *(["**Fix (`--fix`).** " + self.autofix, ""] if self.autofix else []),
                *(["**No automatic fix.** " + self.no_autofix, ""] if self.no_autofix else []),
                *([f"**TorchFix.** {TORCHFIX[self.torchfix]}", ""] if self.torchfix else []),
            ]
        )


# What each TorchFix code that a rule maps to checks, against the rule (docs/lint.md's table).
TORCHFIX = {
    "TOR102": "`TOR102` flags every `torch.load` without `weights_only`; this rule only loads that unpickle anything (`weights_only=False`, or the default on torch older than 2.6). `# noqa: TOR102` silences it too. TorchFix's fix adds `weights_only=True` to every load, also to those that need pickle; this rule's fix only where the object is provably a state dict.",
    "TOR401": "`TOR401` flags every `DataLoader` without `num_workers > 0`; this rule only those feeding a per-sample inference loop. `# noqa: TOR401` silences it too.",
}

R = Rule
RULES: tuple[Rule, ...] = (
    R(
        "SB101",
        "hashseed-in-process",
        "static",
        "PYTHONHASHSEED set inside a running interpreter does nothing for it",
        "Finds assignments to `os.environ['PYTHONHASHSEED']`, `os.environ.setdefault`/`update` with it, and `os.putenv('PYTHONHASHSEED', ...)`.",
        "Python reads PYTHONHASHSEED once, at start-up. Setting it later changes nothing for this interpreter: `hash()` of strings stays salted, so set and dict order still changes from process to process.",
        """
      import os
      os.environ["PYTHONHASHSEED"] = "0"
      """,
        "Set it before the interpreter starts: `samebits run --seed 0 -- python app.py`, or `PYTHONHASHSEED=0 python app.py`. Passing it in a child's `env=` is fine.",
        autofix="Comments the statement out, with a comment above it pointing to `samebits run --seed 0 -- python ...`, where it is a one-line statement of its own that sets nothing else. Not in a file that starts processes (`subprocess`, `multiprocessing`, `concurrent.futures`, `os.system`/`exec*`/`spawn*`/`popen`, a DataLoader with workers): a child started from this process does read the variable.",
    ),
    R(
        "SB102",
        "unknown-backend-flag",
        "static",
        "assignment to a torch.backends flag that this torch does not have",
        "Finds assignments to attributes of `torch.backends.*` modules (cudnn, mkldnn, mps, opt_einsum, ...) and checks the name against a table of each module's names shipped with samebits (taken from torch 2.13, older names kept; a test checks it against the installed torch), so torch is never imported; it suggests the closest real flag.",
        "`torch.backends.cudnn` is a module: assigning a misspelt name such as `determinstic` creates a new attribute and sets nothing. (Objects such as `torch.backends.cuda.matmul` raise on unknown names; modules do not.)",
        """
      import torch
      torch.backends.cudnn.determinstic = True
      """,
        "Spell the flag as torch does (`torch.backends.cudnn.deterministic = True`), or use `samebits.deterministic()`, which sets every flag by feature detection.",
        no_autofix="The flag that was meant is a guess (the message names the closest); setting it changes what the program does, so the choice is yours.",
    ),
    R(
        "SB103",
        "benchmark-with-determinism",
        "static",
        "cudnn.benchmark = True in a file that asks for determinism",
        "Finds `torch.backends.cudnn.benchmark = True` in a file that also calls `torch.use_deterministic_algorithms(True)`, sets `cudnn.deterministic = True` (or a misspelling of it, such as `determinstic` or `determinism`, which sets nothing but says the intent), or uses `samebits.deterministic`. In a file that seeds RNGs, any value but a false constant counts (`cudnn.deterministic = args.deterministic`); tuple assignments are unpacked. Also `benchmark = True` set inside a function that seeds every RNG (torch's with Python's `random` or NumPy's: a seed-everything helper, whose job is runs that repeat); set elsewhere in a file that only seeds, it is taken as a deliberate trade of repeatability for speed (seeded training scripts do it), and not reported.",
        "Benchmark mode times several convolution algorithms at the first call of each shape and keeps the fastest; which one wins depends on noise, so two runs or processes can pick different kernels and give different bits.",
        """
      torch.use_deterministic_algorithms(True)
      torch.backends.cudnn.benchmark = True
      """,
        "Leave `cudnn.benchmark` off where bits must repeat (`samebits.deterministic()` does), or keep the trade-off explicit with `samebits.fast()`.",
        no_autofix="Turning benchmark mode off costs speed: repeatable or fastest is your choice (`samebits.deterministic()` or `samebits.fast()`).",
    ),
    R(
        "SB104",
        "dataloader-workers-unseeded",
        "static",
        "DataLoader with worker processes but neither worker_init_fn nor generator, in a file that seeds RNGs",
        "Finds `DataLoader(..., num_workers=N)` with N not 0 that passes neither `worker_init_fn` nor `generator`, in a file that seeds RNGs. Passing one of them is taken as the worker seeding handled: a seeded `generator` fixes every worker's base seed (from which torch >= 1.9 seeds torch, `random` and NumPy in each worker), a `worker_init_fn` seeds them itself.",
        "Each worker gets its own torch seed from the loader's generator, but NumPy and `random` are not re-seeded per worker: augmentations repeat across workers or change between runs, and without a seeded generator the shuffle order differs per run.",
        """
      torch.manual_seed(0)
      loader = DataLoader(ds, shuffle=True, num_workers=4)
      """,
        "`DataLoader(ds, shuffle=True, num_workers=4, **samebits.dataloader_kwargs(seed))`, which passes a seeded `generator` and a `worker_init_fn` that seeds NumPy and `random` in each worker.",
        no_autofix="The seed to pass comes from your program (which variable holds it is not known here).",
    ),
    R(
        "SB105",
        "cublas-config-late",
        "static",
        "CUBLAS_WORKSPACE_CONFIG set after CUDA may already be in use",
        "Finds `CUBLAS_WORKSPACE_CONFIG` set through `os.environ` or `os.putenv` after code that may have used CUDA (`.cuda()`, `.to('cuda')`, `torch.cuda.*`, `device='cuda'`) earlier in the file.",
        "cuBLAS reads the variable when it creates its handle, at the first matrix product on the GPU. Set later, it is silently ignored and older torch versions raise in deterministic mode.",
        """
      model = model.cuda()
      os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
      """,
        "Set it before the process starts: `samebits run -- python app.py` sets `:4096:8`, or set it at the very top of the entry script, before any CUDA work.",
        no_autofix="Where it must go (before the process starts, or above the first CUDA use in the entry script) depends on how the program starts.",
    ),
    R(
        "SB106",
        "seed-after-model",
        "static",
        "RNGs seeded after the model or random tensors were created",
        "Finds a seeding call (`torch.manual_seed`, `np.random.seed`, `random.seed`, `seed_everything`, ...) that comes after a model was built with fresh weights (see Known limits) or random tensors (`torch.randn`, ...) were created in the same scope.",
        "The weights and the random tensors created before the seed come from an unseeded RNG: they change on every run, whatever happens after.",
        """
      model = Net()
      torch.manual_seed(0)
      """,
        "Seed first, then build: `samebits.seed_everything(0)` at the top of the scope, before any model or random tensor.",
        limits="A model counts as created when it is built here with fresh weights (a `torch.nn` layer, a class of the file or of your package, a torchvision or timm constructor, `from_config`); `from_pretrained`, `torch.load` and `torch.jit.load` bring their own weights.",
        no_autofix="Moving the seed above the model moves a call across other statements, which may depend on the order.",
    ),
    R(
        "SB107",
        "missing-eval",
        "static",
        "a model used for inference never gets .eval()",
        "Finds the first call of a model (see Known limits for what is a model) that some path reaches without `.eval()` or `.train(False)`, in a file that does inference (it uses `no_grad`/`inference_mode`, loads weights or builds a pretrained model) and does not train (no optimizer built by `torch.optim`/a known optimizer class, none stepped or zeroed, no `backward()` on a loss; a profiler's `step()`, an LR scheduler or a saliency map's `score.backward()` is not training). A model passed to a function of the project that runs it (`warm_up(net)`) is used at that call.",
        "In training mode Dropout drops random activations and BatchNorm uses (and updates) the batch statistics: the same input gives other outputs on every call, and a sample's output depends on its batch.",
        """
      model = Net()
      model.load_state_dict(torch.load("w.pt", weights_only=True))
      with torch.inference_mode():
          y = model(x)
      """,
        "Call `model.eval()` once after loading (it returns the model: `model = Net().eval()`).",
        autofix="Inserts `model.eval()` (the model's name as the call spells it) on the line after the model's last assignment before the call, at that assignment's indentation, where the assignment is a statement of its own lines in this file and the inserted line covers every path to the call (else the fix is not applied). Not for a model that is a parameter, comes from another file or is bound by a loop or `with`.",
        limits="A model is a name or `self.` attribute bound to: a `torch.nn` layer or an `nn.Module` class of the file; a torchvision constructor (`torchvision.models.*`, `.detection`, `.segmentation`, `.video`, `.quantization`, `.optical_flow`); `timm.create_model`; `torch.hub.load`; a transformers/diffusers `*.from_config` (training mode) or `*.from_pretrained` (eval mode already); an `nn.Module` class anywhere in the project (subclasses of project classes included), a function of the project that returns a model (also one made through a module-level registry of model classes, `MODELS[name](...)`), or a model made at a project module's top level and imported (`from model import model`; also an instance of a project class whose base the index cannot see, when it is `.eval()`'d there); outside the project, a class imported from your own package whose instance is `.load_state_dict`-ed, `.eval()`-ed or moved. The project is the nearest folder up with `.git`, `pyproject.toml` or `setup.py` (else the paths given), read from its AST (docs/lint.md). A model's call is `model(x)`, `model.forward(x)` or, on a model recognised from its binding (not a library object such as a `SentenceTransformer` or what a library's `load_model` returns, whose methods may handle eval and grad themselves), one of its inference methods (`generate`, `sample`, `predict`, `infer`, `inference`, `decode`, `encode`, `detect`; a transformers model's `generate` turns grad off itself and is not counted for grad). A wrapper (`nn.DataParallel`, `DistributedDataParallel`, FSDP, `torch.compile`, `torch.jit.trace`/`script`) keeps the wrapped model's mode (`fast = torch.compile(net)` of a model never eval'd is found at `fast`'s first call; `net.eval()` before or after wrapping counts, as the wrapper shares its modules), and so does an `nn.Sequential`/`ModuleList`/`ModuleDict` made of one model or its modules alone (`vgg = nn.Sequential(*list(vgg.children())[:31])` after `vgg.eval()`: the children keep eval mode), and so does a project class whose `__init__` evals the model it is given (`TracedModel(model)`); a name bound by a `for` loop or a comprehension (`[m(x) for m in models]`) or to a value of unknown origin (`models[0]`) has an unknown mode. Not models: tokenizers, processors, feature extractors, configs, schedulers (`*.from_pretrained` of those); `torch.nn` loss modules (`nn.CrossEntropyLoss`); a TorchScript file or a loader's result bound to a name that says preprocessing (`transform`, `preprocess`, `tokenizer`, ...); ultralytics models and `transformers.pipeline`/diffusers pipelines, which handle eval and grad themselves. `torch.jit.load`, `torch.load` of a whole model and `torch.export.load(...).module()` keep the mode they were saved in (unknown here). A `self.` attribute is its class's in every method; other names follow Python's scopes. Paths are followed inside each function (branches, loops, early returns, a function returning the model before `.eval()`); for a global or a `self.` attribute, `.eval()` anywhere in the file (class) counts, since the order of calls between functions is not known. A model passed to a function of the project is followed one call in (and on through the parameters it passes on): a function that evals its parameter leaves the caller's model in eval mode, one that runs it uses it at the call; a method of an object whose class is not known is matched by name only to remove a finding. A finding whose evidence is in another file names it (`made in model.py:12, never eval'd there`).",
    ),
    R(
        "SB108",
        "deterministic-warn-only",
        "static",
        "use_deterministic_algorithms(True, warn_only=True) only warns",
        "Finds `torch.use_deterministic_algorithms(True, warn_only=True)`.",
        "With `warn_only=True` an op that has no deterministic implementation still runs its nondeterministic kernel; torch only prints a warning, which is easy to miss in logs.",
        """
      torch.use_deterministic_algorithms(True, warn_only=True)
      """,
        "Use `warn_only=False` where bits must repeat, and replace the ops it reports; keep `warn_only=True` only while surveying.",
        no_autofix="`warn_only=False` makes an op without a deterministic kernel raise: the program may stop where it used to warn.",
    ),
    R(
        "SB109",
        "tf32-with-determinism",
        "static",
        "TF32 or reduced float32 matmul precision allowed in a file that asks for determinism",
        "Finds `allow_tf32 = True`, `fp32_precision = 'tf32'` or `torch.set_float32_matmul_precision('high'|'medium')` in a file that also asks for determinism.",
        "TF32 rounds float32 inputs to 10 mantissa bits on Ampere and newer GPUs: results change with the GPU generation and differ from CPU results far beyond float32 rounding.",
        """
      torch.use_deterministic_algorithms(True)
      torch.backends.cuda.matmul.allow_tf32 = True
      """,
        "Keep float32 at IEEE precision where bits matter (`samebits.deterministic()` sets it in both of torch's APIs).",
        no_autofix="Turning TF32 off changes speed and every float32 result on Ampere and newer GPUs: the trade-off is yours.",
    ),
    R(
        "SB201",
        "per-sample-loop",
        "static",
        "model called in a loop on one sample at a time",
        "Finds a model called inside a loop on a single item: `x.unsqueeze(0)`, `x[None]`, `x[i:i+1]` as its argument, `Variable(x.unsqueeze(0))`, a batch of one made on an earlier line of the loop, or each batch of a `DataLoader` of batch size 1 (the last two over fixed-size inputs).",
        "One sample per forward leaves most of the CPU or GPU idle: a batch of 32 is often 5-10x the throughput. Each call also pays Python and kernel-launch overhead.",
        """
      for image in images:
          out = model(image.unsqueeze(0))
      """,
        "Batch the samples (`model(torch.stack(images))`), or use `samebits.Predictor(model).map(images, batch_size=32)`, which batches with outputs that do not depend on the batch.",
        limits="A direct `unsqueeze(0)`/`[None]`/`[i:i+1]` argument is found in any loop. A batch of one made on an earlier line of the loop body, and a loop over a `DataLoader` whose batch size is 1 (given or by default, also when a function of the file returns it), are found only when the file's inputs have one fixed size (`Resize((h, w))`, a crop to a size, `cv2.resize(img, (w, h))`, PIL's `img.resize((w, h))` (with or without a resample argument), or a call of a project function or class that does one of these, such as an imported `BaseTransform`): inputs of varying size cannot simply be stacked. A resize or crop applied only in a branch (`if args.crop_val:`) or a conditional expression does not fix the size.",
        no_autofix="Batching changes the loop's shape (stack the samples, run once, split the outputs), not one line.",
    ),
    R(
        "SB202",
        "discarded-to-result",
        "static",
        "the result of .to()/.cuda()/.half()/... is thrown away: the tensor stays as it was",
        "Finds a bare expression statement `x.to(...)`, `x.cuda()`, `x.cpu()`, `x.half()`, `x.float()`, `x.double()`, `x.bfloat16()`, `x.contiguous()` on something that is a tensor. Modules move in place, so `model.to(device)` is fine: a name counts as a module when it was bound to `nn.X(...)`, a class of the file that subclasses `nn.Module`, `from_pretrained`/`create_model`/`torch.jit.load`, or when its name says so (`model`, `net`, `module`, `encoder`, `self.backbone`, ...); it counts as a tensor when bound to a `torch.*` tensor factory, or named like `x`, `inputs`, `batch`, `images`, `tensor`, `*_tensor`.",
        "Tensor methods return a new tensor and leave the original alone: the data stays on the CPU (or in float32), the model then runs on another device than intended, or fails with a device mismatch far from the bug.",
        """
      x = torch.randn(8, 3)
      x.cuda()
      y = model(x)
      """,
        "Keep the result: `x = x.cuda()` (or `x = x.to(device)`).",
        autofix="Assigns the result back: `x.cuda()` becomes `x = x.cuda()`, where the moved value is a name, an attribute or a subscript by a constant or a name (so that writing it twice evaluates nothing twice).",
    ),
    R(
        "SB203",
        "dataloader-main-process",
        "static",
        "a per-sample inference loop reads its samples in the main process (DataLoader without workers)",
        "Finds a `DataLoader` of batch size 1 (given or by default) that loads in the main process (`num_workers` not given, or 0), iterated by a loop that runs a model, in a file that does inference and does not train (see SB107), over inputs that do not have one fixed size (where they do, SB201 says to batch them instead). Found at the `DataLoader(...)` call, also inside a function of the file that returns it.",
        "Without worker processes the loader reads, decodes and transforms each sample in the main process between two forwards: the model, and the GPU, wait for every sample. Workers load the next samples while the model runs.",
        """
      loader = DataLoader(ImageFolder(root, transform=T.ToTensor()), batch_size=1)
      with torch.inference_mode():
          for image, _ in loader:
              preds.append(model(image))
      """,
        '`DataLoader(ds, batch_size=1, num_workers=4)` (with `**samebits.dataloader_kwargs(seed)` where transforms are random), started under `if __name__ == "__main__":` where worker processes are spawned (macOS, Windows).',
        no_autofix="The worker count depends on the machine, and workers need the `__main__` guard where processes are spawned and their own seeding (SB104).",
        torchfix="TOR401",
    ),
    R(
        "SB301",
        "inference-without-no-grad",
        "static",
        "model called for inference outside torch.no_grad() / torch.inference_mode()",
        "Finds a model call in an inference path (the file calls `.eval()`, loads weights, or loops over data, or imports a model that the project eval'd, and does not train: see SB107) that is neither inside `with torch.no_grad():` / `with torch.inference_mode():` nor in a function decorated with them. A model that a function receives as an argument is left to the caller, unless this file calls that function with grad on (`test_net(net, ...)` outside no_grad); a call that hands a model to a function of another project file that runs it with grad on is found at that call. Calls inside `forward` are left alone.",
        "With grad mode on, every forward records the autograd graph and keeps its activations alive while the output lives: memory grows with each kept output until out-of-memory, and each forward is slower.",
        """
      model.eval()
      for batch in loader:
          preds.append(model(batch).argmax(1))
      """,
        "Run inference under `with torch.inference_mode():` (or decorate the function with `@torch.inference_mode()`).",
        autofix="Wraps the statement that holds the call in `with torch.inference_mode():` (torch as the file imports it at its top), re-indented with the file's indentation (tabs or spaces); a statement right after such a block joins it. Not where the call sits in an `if`/`for`/`while`/`with` header, a lambda or a generator expression (it runs later), a statement with `yield` or `await` (inference mode would stay on in other code meanwhile), a line shared with another statement, a statement with a string literal spanning lines, or where the output is changed in place later in the function (inference tensors refuse that outside inference mode: wrap that code too, or use `torch.no_grad()`).",
        limits="A model is a name or `self.` attribute bound to: a `torch.nn` layer or an `nn.Module` class of the file; a torchvision constructor (`torchvision.models.*`, `.detection`, `.segmentation`, `.video`, `.quantization`, `.optical_flow`); `timm.create_model`; `torch.hub.load`; a transformers/diffusers `*.from_config` (training mode) or `*.from_pretrained` (eval mode already); an `nn.Module` class anywhere in the project (subclasses of project classes included), a function of the project that returns a model (also one made through a module-level registry of model classes, `MODELS[name](...)`), or a model made at a project module's top level and imported (`from model import model`; also an instance of a project class whose base the index cannot see, when it is `.eval()`'d there); outside the project, a class imported from your own package whose instance is `.load_state_dict`-ed, `.eval()`-ed or moved. The project is the nearest folder up with `.git`, `pyproject.toml` or `setup.py` (else the paths given), read from its AST (docs/lint.md). Not models: tokenizers, processors, feature extractors, configs, schedulers (`*.from_pretrained` of those); `torch.nn` loss modules (`nn.CrossEntropyLoss`); a TorchScript file or a loader's result bound to a name that says preprocessing (`transform`, `preprocess`, `tokenizer`, ...); ultralytics models and `transformers.pipeline`/diffusers pipelines, which handle eval and grad themselves. `torch.jit.load`, `torch.load` of a whole model and `torch.export.load(...).module()` keep the mode they were saved in (unknown here). A `self.` attribute is its class's in every method; other names follow Python's scopes. Besides, names that say model (`model`, `net`, `encoder`, `self.backbone`, ...) count unless bound to a non-model. Grad counts as off inside `with torch.no_grad()`/`inference_mode()`/`set_grad_enabled(False)` (not `inference_mode(False)`), after a bare `torch.set_grad_enabled(False)` or `torch.no_grad().__enter__()` statement in an enclosing body (at a script's top level: for its functions too) until one turning it back on (a bare `torch.no_grad()` call does nothing and does not count), in functions of which any enclosing one is decorated with them or with a decorator whose name ends in `no_grad` or `inference_mode` (`@smart_inference_mode()`), in functions this file or another project file calls under them (or passes, like a diffusion `model_fn`, to a project function that runs what it is given under them), with `Variable(x, volatile=True)` inputs (torch < 0.4), and for a model whose class in this file wraps its whole `forward` in `no_grad`. Grad turned on on purpose (`with torch.enable_grad():` around `torch.autograd.grad`, as classifier guidance does), and model calls in a function (or top-level code) that back-propagates itself (`score.backward()`, `torch.autograd.grad`: a saliency map), are not findings. An inference method (`model.sample(...)`) counts as grad-free when the model's class of this file turns grad off in that method (decorated, or its body one no_grad block), or, the class not known here, when every project method of that name does.",
    ),
    R(
        "SB302",
        "outputs-kept-with-grad",
        "static",
        "model outputs kept in a list or dict outside no-grad without .detach()/.item()",
        'Finds model outputs (a model call, or a name bound to one, also each name unpacked from one: `logits, feats = model(x)`) appended to a list or stored in a dict, also inside a tuple, list or dict (`results.append((name, model(x)))`, `results += [model(x)]`), outside `no_grad`/`inference_mode`, without `.detach()`, `.item()`, `.tolist()` or `.numpy()`. A value that an inference method returns under a string key (`model.inference(x)["predictions"]`) is a post-processed result of unknown type and is not counted.',
        "Each kept output holds its whole autograd graph, with every intermediate activation: memory grows by one forward's activations per iteration until out-of-memory (`samebits doctor` measures how much on your model).",
        """
      for batch in loader:
          outputs.append(model(batch))
      """,
        "Keep plain values (`outputs.append(model(batch).detach())`, or `.item()` for a loss), or run under `torch.inference_mode()`.",
        no_autofix="`.detach()`, `.item()` or `.cpu()` depends on what the kept value is for; SB301's fix (inference mode around the forward) removes the graph where it applies.",
    ),
    R(
        "SB401",
        "unsafe-torch-load",
        "static",
        "torch.load that may unpickle arbitrary code",
        "Finds `torch.load(..., weights_only=False)`, and a bare `torch.load(path)` in a project that supports torch older than 2.6 (its metadata, or code written for old torch), where the default was to unpickle anything.",
        "Unpickling runs code chosen by whoever wrote the file: a checkpoint from the internet can execute anything on load.",
        """
      state = torch.load("checkpoint.pt", weights_only=False)
      """,
        "`torch.load(path, weights_only=True)` for tensors and state dicts; safetensors (`safetensors.torch.load_file`) for weights you share.",
        autofix="Passes `weights_only=True` (or turns `weights_only=False` into `True`) only where the loaded object is provably a state dict: the result goes straight into `load_state_dict(...)` (not with `strict=False`, which would ignore other entries), directly or through a name used for nothing else. Elsewhere (a checkpoint dict, a whole pickled model, `pickle_module=`) it is not fixed and `--fix` says why; nor where the project supports torch older than 1.13, whose `torch.load` has no `weights_only`.",
        torchfix="TOR102",
        limits='The torch range comes from the nearest folder up to the repository root (`.git`) whose `pyproject.toml`, `requirements*.txt`, `setup.cfg` or `setup.py` (string literals, never run) has a `torch` requirement; `torchvision`, `torchaudio` or `torch-geometric` lines say nothing. `[tool.samebits.lint] torch = ">=1.13"` sets it explicitly and wins. In-file evidence of old torch (`Variable`, `volatile=`) counts too. With no torch requirement anywhere, a bare `torch.load` is not reported.',
    ),
    R(
        "SB402",
        "pickle-load",
        "static",
        "pickle.load of a file runs the code inside it",
        "Finds `pickle.load(...)`, `pickle.loads(...)`, `dill.load(...)` and `joblib.load(...)` calls.",
        "A pickle is a program: loading one from an untrusted place executes whatever it contains.",
        """
      with open("features.pkl", "rb") as f:
          features = pickle.load(f)
      """,
        "Store tensors in safetensors or `.npy` (`numpy.load(..., allow_pickle=False)`), other data as JSON.",
        no_autofix="No loader reads a pickle safely: the data must be saved in another format first.",
    ),
    # Runtime rules: measured by `samebits doctor`.
    R(
        "SB151",
        "modules-in-training-mode",
        "runtime",
        "modules whose forward depends on training mode are in training mode",
        "Lists the Dropout, BatchNorm and other training-sensitive modules of the model that are in training mode.",
        "Dropout drops random activations and BatchNorm uses and updates batch statistics: outputs change on every call and with the batch.",
        """
      model = Net()  # .eval() never called
      """,
        sentence(fix_of("training-mode")),
    ),
    R(
        "SB152",
        "batch-variant-outputs",
        "runtime",
        "a sample's output depends on the batch size",
        "Runs one sample alone and inside batches of several sizes and compares the bits.",
        "A server batches requests as they arrive: with batch-variant kernels, the answer to one request depends on the load.",
        """
      model(x[:1]) != model(x)[:1]  # bits
      """,
        sentence(fix_of("batch-size"))
        + " `samebits.Predictor` measures the sizes that keep a row's bits and runs only those.",
    ),
    R(
        "SB153",
        "thread-oversubscription",
        "runtime",
        "torch's threads fight for the cores",
        "Compares torch's intra-op thread count with the CPU cores this process may use, and times the example's forward on torch's thread count against one thread, in interleaved rounds, with the machine's load.",
        "More threads than free cores makes every parallel op wait for its slowest thread (often several times slower): the OpenMP threads spin on cores that other threads or processes need.",
        """
      torch.set_num_threads(64)  # on an 8-core machine
      """,
        "Use fewer threads than the cores that are free (`samebits run --threads N -- ...`, or `OMP_NUM_THREADS`), and keep the count fixed between runs.",
    ),
    R(
        "SB154",
        "thread-count-unpinned",
        "runtime",
        "the thread count is not pinned before start",
        "Reads `OMP_NUM_THREADS` and `MKL_NUM_THREADS` in the process's environment.",
        "Without them torch picks a count from the machine it starts on: another machine or container runs another count, and the bits of parallel reductions change with it.",
        """
      python serve.py  # OMP_NUM_THREADS unset
      """,
        "Pin it before the process starts: `samebits run --threads N -- ...`, or `OMP_NUM_THREADS=N`.",
    ),
    R(
        "SB251",
        "per-sample-inference-slower",
        "runtime",
        "one sample per forward is much slower than batching on this model",
        "Measures samples per second one at a time and in a batch of 32, side by side.",
        "Per-sample forwards leave the hardware idle and pay per-call overhead for every sample.",
        """
      for x in samples: model(x[None])
      """,
        "Batch the samples (`samebits.Predictor(model).map(samples, batch_size=32)`).",
    ),
    R(
        "SB252",
        "faster-backend-available",
        "runtime",
        "another installed backend runs this model faster",
        "Measures TorchScript, ONNX Runtime and torch.compile (where installed and usable here) against eager on the example inputs, with their bit equality.",
        "A faster backend can cut serving cost; its bits may differ from eager, which the finding states.",
        """
      model(x)  # eager
      """,
        "Use the backend through `samebits.Predictor(model, backend=...)`, which validates it against eager and loads one cached artifact in every process.",
    ),
    R(
        "SB351",
        "outputs-carry-grad",
        "runtime",
        "outputs carry grad_fn: grad mode is on and parameters require grad",
        "Calls the model as it is (grad mode on) and checks whether the outputs carry `grad_fn`; measures in a child process how much memory one kept output retains.",
        "Each kept output holds the autograd graph with its activations: memory the inference never needed.",
        """
      y = model(x)  # y.grad_fn is not None
      """,
        "Run inference under `torch.inference_mode()`, and `model.requires_grad_(False)`.",
    ),
    R(
        "SB352",
        "memory-grows-when-outputs-kept",
        "runtime",
        "memory grows with every kept output",
        "Runs N forwards keeping every output, as the model is and under `inference_mode`, each in a fresh child process (RSS only grows within one process), capped so that it cannot exhaust the machine.",
        "A service that keeps outputs (caches, lists, logs) with grad on grows until out-of-memory.",
        """
      outs = [model(x) for _ in range(1000)]
      """,
        "`torch.inference_mode()` around inference, or keep `.detach()`ed copies.",
    ),
)

BY_CODE = {r.code: r for r in RULES}
BY_NAME = {r.name: r for r in RULES}


def find_rule(key: str) -> Rule | None:
    """A rule by code (``SB101``) or name (``hashseed-in-process``), case-insensitively."""
    key = key.strip()
    return BY_CODE.get(key.upper()) or BY_NAME.get(key.lower())


def render_docs() -> str:
    """The whole of ``docs/rules.md``."""
    head = [
        "# Rules",
        "",
        "Generated from `samebits/rules/__init__.py` (`python -m samebits.linter > docs/rules.md`); a test keeps",
        "this file in sync. `samebits lint --explain CODE|NAME` prints one rule. Static rules are found by",
        "`samebits lint` in source, runtime rules by `samebits doctor` on a running model.",
        "",
        "| code | name | kind | message |",
        "|---|---|---|---|",
    ]
    head += [f"| {r.code} | `{r.name}` | {r.kind} | {r.message} |" for r in RULES]
    return "\n".join(head + [""] + [r.explain() for r in RULES]).rstrip() + "\n"
