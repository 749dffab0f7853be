"""The merge-request summary, posted with python-gitlab to a local fake of
GitLab's REST API (never a real GitLab)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from refarch.errors import RefarchError
from refarch.report import mrnote

DATA = Path(__file__).parent / "data" / "records"
TOKEN = "glpat-unit-test-token"


class FakeGitLab(BaseHTTPRequestHandler):
    """POST /api/v4/projects/:id/merge_requests/:iid/notes, as GitLab answers
    it: 201 with the note, 401 for a wrong PRIVATE-TOKEN, 404 for another
    merge request."""

    notes: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.headers.get("PRIVATE-TOKEN") != TOKEN:
            return self._answer(401, {"message": "401 Unauthorized"})
        if self.path != "/api/v4/projects/42/merge_requests/7/notes":
            return self._answer(404, {"message": "404 Not found"})
        self.notes.append(body["body"])
        return self._answer(201, {"id": 1000 + len(self.notes), "body": body["body"]})

    def _answer(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def gitlab_api():
    FakeGitLab.notes = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitLab)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture
def run_dir(tmp_path):
    data = json.loads((DATA / "main-local.json").read_text())
    data["checks"][0].update(outcome="failed", message="node2: sshd offers password authentication\nmore")
    data["check_counts"].update(passed=data["check_counts"]["passed"] - 1, failed=1)
    data.update(tree_hash="ab" * 20, overrides={})
    (tmp_path / "results.json").write_text(json.dumps(data))
    return tmp_path


def env(url, **extra):
    return {"CI_SERVER_URL": url, "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_IID": "7",
            "CI_JOB_URL": f"{url}/group/refarch/-/jobs/99", mrnote.TOKEN_VARIABLE: TOKEN, **extra}


def test_the_summary_is_posted_on_the_merge_request(gitlab_api, run_dir):
    assert mrnote.post_summary(run_dir, env(gitlab_api)) == "mr-note: posted note 1001 on merge request !7"
    (note,) = FakeGitLab.notes
    assert note.startswith("### Horovod reference architecture 0.1.0: FAILED")
    assert "| `scaling.efficiency` | 0.4958 ratio | PASS | lower 0.35, target 0.55 |" in note
    assert "- `tests/integration/test_cluster.py::test_node_count`: node2: sshd offers password authentication" in note
    assert f"[Full report]({gitlab_api}/group/refarch/-/jobs/99/artifacts/file/runs/hvd-root-xngjnl/report.html)" in note


def test_nothing_is_posted_without_a_token_or_outside_a_merge_request(gitlab_api, run_dir):
    assert "REFARCH_GITLAB_TOKEN unset" in mrnote.post_summary(run_dir, env(gitlab_api, REFARCH_GITLAB_TOKEN=""))
    assert "CI_MERGE_REQUEST_IID unset" in mrnote.post_summary(run_dir, env(gitlab_api, CI_MERGE_REQUEST_IID=""))
    assert not FakeGitLab.notes


def test_a_refused_note_is_one_line(gitlab_api, run_dir):
    with pytest.raises(RefarchError, match=r"refused the note on merge request !7: 401: 401 Unauthorized"):
        mrnote.post_summary(run_dir, env(gitlab_api, REFARCH_GITLAB_TOKEN="wrong"))
