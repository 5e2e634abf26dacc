# The two commands of the README: `make run` and `make test`. Both create .venv
# with the exact versions of requirements.lock the first time (or when the lock changes).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
INSTALLED := $(VENV)/.installed
ARGS ?=

EXTRAS := s3 slurm peers vela

.PHONY: setup setup-s3 setup-slurm setup-slurm-cluster setup-peers setup-vela setup-tfmot setup-torch setup-keras-hub run test lock clean-store params repro

setup: $(INSTALLED)

$(INSTALLED): requirements.lock
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	touch $(INSTALLED)

# Optional extras: `make setup-s3` (a store on S3: s3fs), `make setup-slurm` (Hydra's submitit launchers),
# `make setup-peers` (the tools bench/ptq_vs_peers.py measures our PTQ against: ai-edge-quantizer), `make setup-vela`
# (Arm's Ethos-U compiler, which bench/bench_vs_vela.py measures our accelerator compiler against).
setup-s3 setup-slurm setup-peers setup-vela: setup-%: setup requirements-%.lock
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.lock -r requirements-$*.lock

# tfmot (tensorflow-model-optimization) needs tf_keras, which cannot share the lock with Keras 3: an environment of its
# own, .venv/tfmot (inside .venv, so git and the import-cycle check leave it alone), in which the slow test builds a
# real tfmot QAT model (`make setup-tfmot`, then `pytest --slow tests/test_qat_user_models.py`).
# requirements-tfmot.lock is that environment's `pip freeze`.
setup-tfmot: $(VENV)/tfmot/.installed

$(VENV)/tfmot/.installed: requirements-tfmot.lock
	test -x $(VENV)/tfmot/bin/python || $(PYTHON) -m venv $(VENV)/tfmot
	$(VENV)/tfmot/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-tfmot.lock
	touch $@

# LiteRT's converter of PyTorch models (litert-torch, with torch's CPU build, jax and transformers: about 2 GB and a few
# minutes), which bench/models_from_tools.py converts its PyTorch models with, as users do: an environment of its own,
# .venv/torch (its pins are not the project's), never part of `make test`. requirements-torch.lock is its `pip freeze`
# (torch 2.13.0+cpu: the machine's wheel; elsewhere add --extra-index-url https://download.pytorch.org/whl/cpu).
setup-torch: $(VENV)/torch/.installed $(VENV)/onnx2tf/.installed

$(VENV)/torch/.installed: requirements-torch.lock
	test -x $(VENV)/torch/bin/python || $(PYTHON) -m venv $(VENV)/torch
	$(VENV)/torch/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-torch.lock
	touch $@

# onnx2tf pins TensorFlow 2.19 and NumPy 1.26, so it has an environment of its own (about 2 GB): .venv/onnx2tf.
$(VENV)/onnx2tf/.installed: requirements-onnx2tf.lock
	test -x $(VENV)/onnx2tf/bin/python || $(PYTHON) -m venv $(VENV)/onnx2tf
	$(VENV)/onnx2tf/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-onnx2tf.lock
	touch $@

# keras-hub, for its models in bench/models_from_tools.py and to load its .keras files (PYTHONPATH=.venv/keras_hub):
# installed beside the project's environment (pip --target), not into it, and without its dependencies' resolution:
# keras-hub asks tensorflow-text, which asks the full `tensorflow` package over the project's tensorflow-cpu; its image
# models never import it. The lock lists what it needs that the project's environment lacks.
setup-keras-hub: $(VENV)/keras_hub/.installed

$(VENV)/keras_hub/.installed: requirements-keras-hub.lock $(INSTALLED)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --target $(VENV)/keras_hub -r requirements-keras-hub.lock
	touch $@

$(VENV)/.installed-test: $(INSTALLED) $(foreach extra,$(EXTRAS) test,requirements-$(extra).lock)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.lock $(foreach extra,$(EXTRAS) test,-r requirements-$(extra).lock)
	touch $@

run: setup
	$(VENV)/bin/python run.py $(ARGS)

# A single-node Slurm cluster for the submitit_slurm test (tests/slurm_cluster.py starts it on loopback): Debian's
# slurm-wlm and munge, installed where this runs as root with apt-get; elsewhere the test is skipped and says why.
setup-slurm-cluster:
	@if ! command -v sbatch >/dev/null || ! test -x /usr/sbin/slurmctld || ! test -x /usr/sbin/munged; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's slurm-wlm and munge for the Slurm test"; \
	    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null 2>&1; } || \
	      echo "setup-slurm-cluster: could not install slurm-wlm and munge; the Slurm test will be skipped"; \
	  else echo "setup-slurm-cluster: slurm-wlm and munge need root and apt-get to install; the Slurm test will be skipped"; fi; \
	fi

# The tests cover the extras too: they are installed with a loopback S3 server (moto) and a loopback Slurm cluster.
# pytest-xdist runs them in TEST_WORKERS processes, each test file in one of them (its module fixtures built once, the
# Slurm test's fixed port held by one process): 28 minutes on 2 cores where one process took 45. Each worker holds
# TensorFlow (about 2 GiB at its peak), so the default is CI's core count, not every core of a larger machine.
TEST_WORKERS ?= 2
test: $(VENV)/.installed-test setup-slurm-cluster
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

# Re-pin after editing requirements.in.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet -r requirements.in
	echo '# Exact versions of every package, generated by `make lock` from requirements.in (Python 3.11).' > requirements.lock
	.lock-venv/bin/python -m pip freeze --exclude-editable >> requirements.lock
	for extra in $(EXTRAS) test; do \
	  .lock-venv/bin/python -m pip install --quiet --dry-run --ignore-installed --report .lock-venv/$$extra.json \
	    -r requirements-$$extra.in -c requirements.lock && \
	  .lock-venv/bin/python .ci/lock_extra.py .lock-venv/$$extra.json requirements.lock requirements-$$extra.lock || exit 1; \
	done
	rm -rf .lock-venv

clean-store:
	rm -rf .store

# params.yaml is conf/ composed with no overrides, exactly as DVC's Hydra composition writes it.
params: setup
	$(VENV)/bin/python -c "import os; from dvc.utils.hydra import compose_and_dump; compose_and_dump('params.yaml', os.path.abspath('conf'), None, 'config', os.getcwd(), [])"

repro: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/dvc repro
