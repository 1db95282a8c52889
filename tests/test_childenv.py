"""The allow-list of a child's environment (cudaship.childenv): what a package's code sees of the caller's."""

from __future__ import annotations

from cudaship.childenv import contained_environment, is_secret

CALLER = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LD_LIBRARY_PATH": "/opt/lib",
    "CUDA_VISIBLE_DEVICES": "0",
    "CUDA_HOME": "/usr/local/cuda",
    "HOME": "/home/user",
    "TMPDIR": "/home/user/tmp",
    "XDG_CACHE_HOME": "/home/user/.cache",
    "PIP_INDEX_URL": "https://pypi.example/simple",
    "PIP_PASSWORD": "hunter2",
    "PIP_CLIENT_CERT": "/home/user/cert.pem",
    "GITHUB_TOKEN": "ghp_x",
    "GH_TOKEN": "x",
    "ACTIONS_RUNTIME_TOKEN": "x",
    "AWS_ACCESS_KEY_ID": "AKIA",
    "AWS_SECRET_ACCESS_KEY": "x",
    "AZURE_CLIENT_SECRET": "x",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/user/gcp.json",
    "DOCKER_AUTH_CONFIG": "{}",
    "NPM_TOKEN": "x",
    "TWINE_PASSWORD": "x",
    "TWINE_USERNAME": "__token__",
    "HF_TOKEN": "x",
    "MY_API_KEY": "x",
    "DB_PASSWORD": "x",
    "SOME_SECRET": "x",
    "CUDA_TOKEN": "x",  # an allowed prefix, still a credential's name
    "SSH_AUTH_SOCK": "/tmp/ssh",
    "PYTHONPATH": "/home/user/src",
    "LD_PRELOAD": "/home/user/hook.so",
    "UNRELATED": "x",
}


def test_only_the_allow_list_reaches_a_child() -> None:
    env = contained_environment(CALLER, home="/run/home", tmp="/run/tmp")
    kept = {k for k in CALLER if k in env and env[k] == CALLER[k]}
    assert kept == {"PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME"}
    assert env["HOME"] == "/run/home"
    assert env["XDG_CACHE_HOME"] == "/run/home/.cache"
    assert env["TMPDIR"] == env["TMP"] == env["TEMP"] == "/run/tmp"
    assert not any(v in ("x", "hunter2", "ghp_x", "AKIA") for v in env.values())


def test_pip_gets_its_settings_but_not_its_credentials() -> None:
    env = contained_environment(CALLER, home="/h", tmp="/t", pip=True)
    assert env["PIP_INDEX_URL"] == "https://pypi.example/simple"
    assert "PIP_PASSWORD" not in env and "PIP_CLIENT_CERT" not in env
    assert "GITHUB_TOKEN" not in env and "TWINE_USERNAME" not in env


def test_secret_names() -> None:
    secrets = ("GITHUB_TOKEN", "aws_session_token", "X_PASSWORD_FILE", "GCP_PROJECT", "NPM_CONFIG_USERCONFIG")
    for name in secrets:
        assert is_secret(name), name
    for name in ("PATH", "LANG", "LC_CTYPE", "CUDA_VISIBLE_DEVICES", "PIP_INDEX_URL", "LD_LIBRARY_PATH"):
        assert not is_secret(name), name
