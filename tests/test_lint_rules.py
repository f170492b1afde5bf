"""Each rule: snippets that must be found, and idiomatic code that must not be."""

import textwrap

import pytest

from samebits.linter import lint_source


def codes(source, min_torch=None):
    return [f.code for f in lint_source(textwrap.dedent(source), min_torch=min_torch)]


POSITIVE = {
    "SB101": [
        "import os\nos.environ['PYTHONHASHSEED'] = '0'\n",
        "import os\nos.environ.setdefault('PYTHONHASHSEED', '0')\n",
        "import os\nos.putenv('PYTHONHASHSEED', '1')\n",
        "import os\nos.environ.update({'PYTHONHASHSEED': '1'})\n",
    ],
    "SB102": [
        "import torch\ntorch.backends.cudnn.determinstic = True\n",
        "import torch.backends.cudnn as cudnn\ncudnn.benchmrk = False\n",
        "import torch\ntorch.backends.mkldnn.enable = False\n",
    ],
    "SB103": [
        "import torch\ntorch.use_deterministic_algorithms(True)\ntorch.backends.cudnn.benchmark = True\n",
        # the seed's script: every RNG seeded, deterministic cuDNN asked for (misspelled), benchmark on
        "import torch, random\nrandom.seed(0)\ntorch.manual_seed(0)\ntorch.backends.cudnn.determinstic = True\n"
        "torch.backends.cudnn.benchmark = True\n",
    ],
    "SB104": [
        "import torch\nfrom torch.utils.data import DataLoader\ntorch.manual_seed(0)\nloader = DataLoader(ds, num_workers=4)\n"
    ],
    "SB105": ["import os\nimport torch\nmodel = model.cuda()\nos.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\n"],
    "SB106": [
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.manual_seed(0)\n",
        "import torch\ndef main():\n    noise = torch.randn(3)\n    torch.manual_seed(0)\n",
        "import numpy as np\nimport random\nw = np.random.rand(3)\nrandom.seed(0)\n",
    ],
    "SB107": [
        "import torch\nmodel = Net()\nmodel.load_state_dict(torch.load('w.pt', weights_only=True))\nwith torch.inference_mode():\n    y = model(x)\nclass Net(torch.nn.Module):\n    pass\n"
    ],
    "SB108": ["import torch\ntorch.use_deterministic_algorithms(True, warn_only=True)\n"],
    "SB109": [
        "import torch\ntorch.use_deterministic_algorithms(True)\ntorch.backends.cuda.matmul.allow_tf32 = True\n",
        "import torch\ntorch.backends.cudnn.deterministic = True\ntorch.set_float32_matmul_precision('high')\n",
    ],
    "SB201": [
        "from torch.autograd import Variable\nfor img in images:\n    out = model(Variable(img.unsqueeze(0)))\n",
        "import torch\nwith torch.no_grad():\n    for img in images:\n        out = model(img.unsqueeze(0))\n",
        "import torch\nwith torch.no_grad():\n    for i in range(n):\n        out = model(x[i:i+1])\n",
        "import torch\nwith torch.no_grad():\n    for img in images:\n        out = net(img[None])\n",
    ],
    "SB202": [
        "import torch\nx = torch.randn(2)\nx.cuda()\n",
        "def f(batch):\n    batch.to('cuda')\n",
        "inputs.half()\n",
        "self_tensor = None\nimages.contiguous()\n",
    ],
    "SB203": [
        "import torch\nfrom torch.utils.data import DataLoader\nmodel.eval()\nloader = DataLoader(ds, num_workers=0)\n"
        "with torch.no_grad():\n    for x in loader:\n        preds.append(model(x))\n",
    ],
    "SB301": [
        "import torch\nmodel.eval()\nfor batch in loader:\n    preds = model(batch)\n",
        # grad turned off, then on again before the loop
        "import torch\nmodel.eval()\ntorch.set_grad_enabled(False)\nwarm(model)\ntorch.set_grad_enabled(True)\n"
        "for batch in loader:\n    preds = model(batch)\n",
        # inference through a method: a decoder loop's generate, a sampler's sample
        "import torch\nmodel = Net()\nmodel.load_state_dict(torch.load('w.pt', weights_only=True))\nmodel.eval()\n"
        "for text in texts:\n    mel = model.generate(text)\nclass Net(torch.nn.Module):\n    pass\n",
        # a profiler's step() is not an optimizer's: the file is still inference
        "import torch\nmodel.eval()\nwith torch.profiler.profile() as p:\n    for batch in loader:\n"
        "        preds = model(batch)\n        p.step()\n",
    ],
    "SB302": [
        "outs = []\nfor batch in loader:\n    outs.append(model(batch))\n",
        "for x, y in loader:\n    out = model(x)\n    loss = criterion(out, y)\n    loss.backward()\n    losses.append(loss)\n",
        "total = 0\nfor x in loader:\n    total += model(x).sum()\n",
        "cache = {}\nfor k, x in items:\n    cache[k] = model(x)\n",
    ],
    "SB401": ["import torch\nsd = torch.load('w.pt', weights_only=False)\n"],
    "SB402": ["import pickle\nwith open('f.pkl', 'rb') as f:\n    data = pickle.load(f)\n"],
}

NEGATIVE = {
    "SB101": [
        "import os, subprocess\nenv = dict(os.environ)\nenv['PYTHONHASHSEED'] = '0'\nsubprocess.run(cmd, env=env)\n"
    ],
    "SB102": [
        "import torch\ntorch.backends.cudnn.deterministic = True\ntorch.backends.cudnn.benchmark = False\ntorch.backends.cuda.matmul.allow_tf32 = False\n"
    ],
    "SB103": [
        "import torch\ntorch.backends.cudnn.benchmark = True\n",
        "import torch\ntorch.use_deterministic_algorithms(True)\ntorch.backends.cudnn.benchmark = False\n",
    ],
    "SB104": [
        "import torch\nimport samebits\nfrom torch.utils.data import DataLoader\ntorch.manual_seed(0)\nloader = DataLoader(ds, num_workers=4, **samebits.dataloader_kwargs(0))\n",
        "import torch\nfrom torch.utils.data import DataLoader\ntorch.manual_seed(0)\nloader = DataLoader(ds, num_workers=0)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=4)\n",
        # one of the two is the seeding handled: a seeded generator, or a worker_init_fn
        "import torch\nfrom torch.utils.data import DataLoader\ntorch.manual_seed(0)\nloader = DataLoader(ds, num_workers=4, generator=g)\n",
        "import torch\nfrom torch.utils.data import DataLoader\ntorch.manual_seed(0)\nloader = DataLoader(ds, num_workers=4, worker_init_fn=f)\n",
    ],
    "SB105": ["import os\nos.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\nimport torch\nmodel = model.cuda()\n"],
    "SB106": [
        "import torch\nfrom torch import nn\ntorch.manual_seed(0)\nmodel = nn.Linear(2, 2)\n",
        "import torch\ng = torch.Generator().manual_seed(1)\nx = torch.randn(3, generator=g)\n",
    ],
    "SB107": [
        "import torch\nmodel = Net().eval()\nmodel.load_state_dict(torch.load('w.pt', weights_only=True))\nwith torch.inference_mode():\n    y = model(x)\nclass Net(torch.nn.Module):\n    pass\n",
        "import torch\nmodel = Net()\nmodel.load_state_dict(torch.load('w.pt', weights_only=True))\nmodel.eval()\nwith torch.no_grad():\n    y = model(x)\nclass Net(torch.nn.Module):\n    pass\n",
        "import torch\nmodel = Net()\nmodel.train(False)\nwith torch.no_grad():\n    y = model(x)\nclass Net(torch.nn.Module):\n    pass\n",
        # a model already eval'd, wrapped: the wrapper is no fresh model in training mode
        "import torch\nmodel = Net()\nmodel.load_state_dict(torch.load('w.pt', weights_only=True))\nmodel.eval()\n"
        "net = torch.nn.DataParallel(model)\nfast = torch.compile(model)\nwith torch.no_grad():\n"
        "    y = net(x)\n    z = fast(x)\nclass Net(torch.nn.Module):\n    pass\n",
    ],
    "SB108": ["import torch\ntorch.use_deterministic_algorithms(True)\n"],
    "SB109": ["import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n"],
    "SB201": [
        "import torch\nwith torch.no_grad():\n    out = model(torch.stack(images))\n",
        "import torch\nwith torch.no_grad():\n    for batch in loader:\n        out = model(batch)\n",
    ],
    "SB202": [
        "import torch\nx = torch.randn(2)\nx = x.to('cuda')\n",
        "model.to(device)\n",
        "net.cuda()\n",
        "self.backbone.half()\n",
        "m = make()\nm.to(device)\n",
    ],
    "SB203": [
        "import torch\nfrom torch.utils.data import DataLoader\nmodel.eval()\nloader = DataLoader(ds, num_workers=2)\n"
        "with torch.no_grad():\n    for x in loader:\n        preds.append(model(x))\n",
    ],
    "SB301": [
        # transformers' generate turns grad off itself
        "from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained('gpt2')\n"
        "for p in prompts:\n    out = model.generate(p)\n",
        "import torch\nmodel.eval()\ntorch.set_grad_enabled(False)\nfor batch in loader:\n    preds = model(batch)\n",
        "import torch\nmodel.eval()\ndef run(batch):\n    return model(batch)\ntorch.set_grad_enabled(False)\nrun(x)\n",
        "import torch\nmodel.eval()\nwith torch.inference_mode():\n    for batch in loader:\n        preds = model(batch)\n",
        "import torch\nmodel.eval()\n@torch.no_grad()\ndef predict(batch):\n    return model(batch)\n",
        "import torch\nmodel.eval()\ndef predict(model, batch):\n    return model(batch)\n",
        "import torch\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    opt.step()\n",
    ],
    "SB302": [
        "outs = []\nfor batch in loader:\n    outs.append(model(batch).detach())\n",
        "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    losses.append(loss.item())\n",
        "import torch\nwith torch.inference_mode():\n    outs = []\n    for batch in loader:\n        outs.append(model(batch))\n",
        "total = 0\nfor x in loader:\n    total += model(x).sum().item()\n",
    ],
    "SB401": ["import torch\nsd = torch.load('w.pt', weights_only=True)\n", "import torch\nsd = torch.load('w.pt')\n"],
    "SB402": ["import json\nwith open('f.json') as f:\n    data = json.load(f)\n"],
}


@pytest.mark.parametrize(("code", "source"), [(c, s) for c, sources in POSITIVE.items() for s in sources])
def test_rule_finds(code, source):
    assert code in codes(source)


@pytest.mark.parametrize(("code", "source"), [(c, s) for c, sources in NEGATIVE.items() for s in sources])
def test_rule_stays_quiet_on_correct_code(code, source):
    assert code not in codes(source)


def test_every_static_rule_has_positive_and_negative_snippets():
    from samebits.rules import RULES

    static = {r.code for r in RULES if r.kind == "static"}
    assert static == set(POSITIVE) == set(NEGATIVE)


def test_idiomatic_inference_script_is_clean():
    source = """
    import torch
    import samebits
    from torch import nn

    samebits.seed_everything(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    model.load_state_dict(torch.load("w.pt", weights_only=True))
    model.to(device)
    x = torch.randn(16, 8)
    x = x.to(device)
    with torch.inference_mode():
        preds = [model(batch) for batch in x.split(4)]
        logits = model(x)
    """
    assert codes(source) == []


def test_unknown_backend_flag_suggests_the_real_name():
    (f,) = lint_source("import torch\ntorch.backends.cudnn.determinstic = True\n")
    assert (
        f.message
        == "torch.backends.cudnn has no flag 'determinstic': the assignment sets nothing; did you mean 'deterministic'?"
    )


def test_bare_torch_load_is_unsafe_only_where_old_torch_is_supported():
    source = "import torch\nsd = torch.load('w.pt')\n"
    assert codes(source, min_torch=(2, 1)) == ["SB401"]
    assert codes(source, min_torch=(2, 6)) == []


def test_noqa_silences_one_line_by_code_or_name_or_all():
    assert codes("import os\nos.environ['PYTHONHASHSEED'] = '0'  # noqa: SB101\n") == []
    assert codes("import os\nos.environ['PYTHONHASHSEED'] = '0'  # noqa: hashseed-in-process\n") == []
    assert codes("import os\nos.environ['PYTHONHASHSEED'] = '0'  # noqa\n") == []
    assert codes("import os\nos.environ['PYTHONHASHSEED'] = '0'  # noqa: SB202\n") == ["SB101"]


def test_findings_carry_position_and_format():
    (f,) = lint_source("import os\n\nos.environ['PYTHONHASHSEED'] = '0'\n", "app.py")
    assert (
        f.text()
        == "app.py:3:1: SB101 hashseed-in-process PYTHONHASHSEED set inside a running interpreter does nothing for it"
    )
