"""The environment of a process that runs other people's code (``audit --load``'s pip and imports,
``doctor --env --confirm``'s imports): an allow-list, as data, and one pure function.

A child gets only the variables named below, never the caller's whole environment: a CI machine's
``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``TWINE_PASSWORD`` or ``NPM_TOKEN`` is not the wheel's business.
A variable the allow-list admits is still dropped when its name looks like a credential (:data:`SECRET_PARTS`,
:data:`CREDENTIAL_PREFIXES`), and pip's own variables (``PIP_*``) reach pip only, never the imports.
``HOME``, the XDG directories and the temporary directory point into the run's own directory (given by the
caller, which creates it and removes it), so nothing the package writes lands in the caller's home.

Pure: :func:`contained_environment` reads only the mapping it is given.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

#: Variables a child keeps, as the caller has them (names, or ``fnmatch`` patterns): the program search path,
#: the locale, the dynamic loader's path (doctor --env simulates with it, so the real loader must see it too),
#: which GPUs are visible and where the CUDA toolkit is, and what Windows needs to start a process at all.
ALLOWED: tuple[str, ...] = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
    "DYLD_FALLBACK_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_PATH_V*",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    # Windows: a process without these cannot load system DLLs or find cmd
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
)

#: Variables pip (and only pip) keeps besides :data:`ALLOWED`: its own settings (``PIP_INDEX_URL``,
#: ``PIP_EXTRA_INDEX_URL``, ``PIP_CERT``...), the certificates a corporate proxy needs, the proxies.
PIP_ALLOWED: tuple[str, ...] = (
    "PIP_*",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)

#: A name holding one of these (case-insensitively) is a credential, whatever list admitted it.
SECRET_PARTS: tuple[str, ...] = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "_KEY",
    "APIKEY",
    "API_KEY",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "NETRC",
    "CLIENT_CERT",
)

#: Prefixes of cloud, registry and CI credentials: dropped whatever list admitted them.
CREDENTIAL_PREFIXES: tuple[str, ...] = (
    "AWS_",
    "AZURE_",
    "ARM_",
    "GOOGLE_",
    "GCP_",
    "GCLOUD_",
    "CLOUDSDK_",
    "DOCKER_",
    "NPM_",
    "TWINE_",
    "GITHUB_",
    "GH_",
    "GITLAB_",
    "CI_JOB_",
    "ACTIONS_",
    "HF_",
    "HUGGING_FACE_",
    "CONDA_",
    "UV_",
    "POETRY_",
    "KUBE",
    "VAULT_",
    "SSH_",
    "GPG_",
)

#: What the variables of the caller's home and temporary directory become, relative to the run's directory:
#: ``HOME`` and the XDG directories under ``home``, the temporary directory ``tmp``.
HOME_VARIABLES: tuple[str, ...] = ("HOME", "USERPROFILE")
XDG_VARIABLES: dict[str, str] = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_CACHE_HOME": ".cache",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
    "APPDATA": "AppData/Roaming",
    "LOCALAPPDATA": "AppData/Local",
}
TMP_VARIABLES: tuple[str, ...] = ("TMPDIR", "TMP", "TEMP")


def is_secret(name: str) -> bool:
    """Whether a variable's name says it holds a credential (:data:`SECRET_PARTS`,
    :data:`CREDENTIAL_PREFIXES`)."""
    upper = name.upper()
    return any(part in upper for part in SECRET_PARTS) or upper.startswith(CREDENTIAL_PREFIXES)


def _allowed(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(name.upper(), p) for p in patterns)


def contained_environment(
    environ: Mapping[str, str], *, home: str, tmp: str, pip: bool = False, sep: str = "/"
) -> dict[str, str]:
    """The environment of a child that runs a package's code: of ``environ``, only what :data:`ALLOWED` (and
    with ``pip``, :data:`PIP_ALLOWED`) names and :func:`is_secret` does not; ``HOME``, the XDG and Windows
    profile directories under ``home``; ``TMPDIR``/``TMP``/``TEMP`` ``tmp``. ``sep``: the path separator the
    child's OS joins with."""
    patterns = ALLOWED + (PIP_ALLOWED if pip else ())
    out = {k: v for k, v in environ.items() if _allowed(k, patterns) and not is_secret(k)}
    for key in HOME_VARIABLES:
        out[key] = home
    for key, below in XDG_VARIABLES.items():
        out[key] = home + sep + below.replace("/", sep)
    for key in TMP_VARIABLES:
        out[key] = tmp
    return out


__all__ = ["ALLOWED", "PIP_ALLOWED", "contained_environment", "is_secret"]
