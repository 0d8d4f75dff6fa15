"""Sphinx extension: the repository the site is built from, and the buttons that lead to it.

The repository is not written in the book's configuration: it is the one the build runs in. In
GitHub Actions that is ``GITHUB_REPOSITORY`` (``owner/name``) on ``GITHUB_SERVER_URL``, at the
commit ``GITHUB_SHA``, so a fork's site links to the fork. ``IOATTN_REPOSITORY=owner/name`` (and
``IOATTN_SHA``) name one explicitly, say for a local build that is to be published. With no
repository at all (a local build), the pages show no repository, issue or launch buttons rather
than buttons that lead nowhere.

A page that names the package's address writes :data:`PACKAGE_URL`
(``git+https://github.com/OWNER/NAME.git@COMMIT``); each page's source has it replaced by the
repository's own address at the built commit when it is read, so that a command such as the
instructor guide's ``pip install`` installs, as printed, the package the site describes.

The launch buttons (Colab, Binder) open the page's student notebook on the branch
``IOATTN_NOTEBOOKS_BRANCH`` (default ``notebooks``), which the Pages workflow fills with the
notebooks of the same build (see ``book/_ext/notebooks.py`` and ``.github/workflows/book.yml``):
Colab opens only notebooks held in a GitHub repository. The providers are the ``launch_buttons``
of ``_config.yml``.

sphinx-book-theme 1.3 reads ``repository_url``, ``repository_branch``, ``path_to_docs``,
``use_repository_button``, ``use_issues_button`` and ``launch_buttons`` from
``html_theme_options``, at ``builder-inited`` (the repository's parts) and for every page (the
buttons); this extension sets them at ``config-inited``, before either.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

#: The branch that holds the generated notebooks the launch buttons open.
NOTEBOOKS_BRANCH = "notebooks"
#: What a page writes for the package's address at the commit the site is built from (as in
#: the instructor guide's ``pip install``); replaced by the repository's own at ``source-read``.
PACKAGE_URL = "git+https://github.com/OWNER/NAME.git@COMMIT"
_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Repository:
    """Where the site comes from: ``owner/name`` on ``server`` at commit ``sha`` (or None).

    Attributes
    ----------
    slug : str
        ``owner/name``.
    server : str
        ``https://github.com`` or a GitHub Enterprise server.
    sha : str or None
        The commit the site was built from, when known.
    site : str
        The site's URL, ending with ``/``: ``IOATTN_SITE_URL``, or GitHub Pages' address for the
        repository (``https://<owner>.github.io/<name>/``).
    branch : str
        The branch with the generated notebooks.
    """

    slug: str
    server: str = "https://github.com"
    sha: str | None = None
    site: str = ""
    branch: str = NOTEBOOKS_BRANCH

    @property
    def owner(self) -> str:
        return self.slug.split("/")[0]

    @property
    def name(self) -> str:
        return self.slug.split("/")[1]

    @property
    def url(self) -> str:
        """The repository's web page."""
        return f"{self.server}/{self.slug}"

    @property
    def requirement(self) -> str:
        """The pip requirement of the package at the built commit (at the default branch's
        head when the commit is unknown)."""
        ref = f"@{self.sha}" if self.sha else ""
        return f"ioattn @ git+{self.url}.git{ref}"


def pages_url(slug: str) -> str:
    """GitHub Pages' address of repository ``slug``: ``https://<owner>.github.io/<name>/``, or
    ``https://<owner>.github.io/`` for the repository named ``<owner>.github.io``."""
    owner, name = slug.split("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def from_environment(environ=None) -> Repository | None:
    """The repository of this build, from the environment (see the module's docstring); None
    when there is none."""
    env = os.environ if environ is None else environ
    slug = (env.get("IOATTN_REPOSITORY") or env.get("GITHUB_REPOSITORY") or "").strip()
    if not slug:
        return None
    if not _NAME.fullmatch(slug):
        raise ValueError(f"the repository should be owner/name, not {slug!r}")
    explicit = bool(env.get("IOATTN_REPOSITORY"))
    sha = (env.get("IOATTN_SHA") or ("" if explicit else env.get("GITHUB_SHA")) or "").strip()
    if sha and not re.fullmatch(r"[0-9a-fA-F]{7,40}", sha):
        raise ValueError(f"the commit should be a hexadecimal SHA, not {sha!r}")
    server = (env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/")
    site = (env.get("IOATTN_SITE_URL") or pages_url(slug)).rstrip("/") + "/"
    branch = env.get("IOATTN_NOTEBOOKS_BRANCH") or NOTEBOOKS_BRANCH
    return Repository(slug, server, sha or None, site, branch)


def theme_options(options: dict, repo: Repository | None) -> dict:
    """``options`` (sphinx-book-theme's ``html_theme_options``) with the repository's buttons
    set for ``repo``, or removed when it is None."""
    out = dict(options)
    launch = dict(out.get("launch_buttons") or {})
    if repo is None:
        for key in ("repository_url", "repository_branch", "path_to_docs"):
            out.pop(key, None)
        out.update(use_repository_button=False, use_issues_button=False,
                   use_edit_page_button=False, use_source_button=False)
        out["launch_buttons"] = {}
        return out
    out.update(repository_url=repo.url, repository_branch=repo.branch, path_to_docs="",
               use_repository_button=True, use_issues_button=True)
    launch["thebe"] = False
    out["launch_buttons"] = launch
    return out


def _config_inited(app, config):
    repo = from_environment()
    config.html_theme_options = theme_options(config.html_theme_options, repo)
    app.ioattn_repository = repo


def _notebook_launch_urls(app, pagename, templatename, context, doctree):
    """The theme names the page's source (``book/x.md``) in the launch URLs; the branch holds
    ``book/x.ipynb``."""
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            url = button.get("url", "")
            for suffix in (".md", ".ipynb"):
                if url.endswith(f"{pagename}{suffix}"):
                    button["url"] = url[: -len(suffix)] + ".ipynb"


def with_package_url(text: str, repo: Repository | None) -> str:
    """``text`` with :data:`PACKAGE_URL` written as ``repo``'s package address at its commit
    (unchanged without a repository)."""
    if repo is None:
        return text
    return text.replace(PACKAGE_URL, repo.requirement.split(" @ ", 1)[1])


def _source_read(app, docname, source):
    source[0] = with_package_url(source[0], getattr(app, "ioattn_repository", None))


def setup(app):
    app.connect("config-inited", _config_inited, priority=900)
    app.connect("source-read", _source_read)
    app.connect("html-page-context", _notebook_launch_urls, priority=510)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
