"""@azure/service-bus (the JavaScript SDK, which sends no message-id and needs one back) against a
node: batched and single sends, peek-lock receive and complete, the next available session
(drained empty, then its state set and read); and its ServiceBusAdministrationClient, which
speaks HTTPS to the connection string's host and port (7.9.5 ignores UseDevelopmentEmulator
there) and trusts the node's self-signed certificate through NODE_EXTRA_CA_CERTS. Installed by the test with npm
into a temporary directory; skipped with the reason when Node.js, npm or the package is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from qmgr.node.sbport import CERT_FILE  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

JS_SDK = "@azure/service-bus@7.9.5"
CLIENT = r"""
const { ServiceBusClient } = require("@azure/service-bus");
(async () => {
  const conn = process.argv[2];
  const out = {};
  const client = new ServiceBusClient(conn);
  const sender = client.createSender("js");
  await sender.sendMessages([{ body: "j1" }, { body: "j2" }]);
  await sender.sendMessages({ body: "j3", applicationProperties: { n: 3 } });
  await sender.close();
  const receiver = client.createReceiver("js", { receiveMode: "peekLock" });
  let got = [];
  while (got.length < 3) {
    const batch = await receiver.receiveMessages(10, { maxWaitTimeInMs: 5000 });
    if (!batch.length) break;
    for (const m of batch) { await receiver.completeMessage(m); got.push(m); }
  }
  out.bodies = got.map((m) => m.body);
  out.ids = got.map((m) => !!m.messageId);
  out.seq = got.map((m) => Number(m.sequenceNumber));
  await receiver.close();
  const ss = client.createSender("jss");
  await ss.sendMessages([{ body: "s-a", sessionId: "s1" }, { body: "s-b", sessionId: "s1" }]);
  await ss.close();
  const sr = await client.acceptNextSession("jss");
  out.session = sr.sessionId;
  const sgot = [];
  while (sgot.length < 2) {
    const batch = await sr.receiveMessages(10, { maxWaitTimeInMs: 3000 });
    if (!batch.length) break;
    for (const m of batch) { await sr.completeMessage(m); sgot.push(m.body); }
  }
  const empty = await sr.receiveMessages(1, { maxWaitTimeInMs: 1000 });
  out.sessionBodies = sgot;
  out.emptyAfter = empty.length;
  await sr.setSessionState("done");
  out.state = String(await sr.getSessionState());
  await sr.close();
  await client.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""


ADMIN = r"""
const { ServiceBusAdministrationClient } = require("@azure/service-bus");
(async () => {
  const admin = new ServiceBusAdministrationClient(process.argv[2]);
  const out = {};
  await admin.createQueue("jsadmin", { maxDeliveryCount: 7, lockDuration: "PT45S" });
  const q = await admin.getQueue("jsadmin");
  out.queue = { maxDeliveryCount: q.maxDeliveryCount, lockDuration: q.lockDuration };
  await admin.createTopic("jstopic");
  await admin.createSubscription("jstopic", "audit");
  await admin.createRule("jstopic", "audit", "big", { sqlExpression: "size > 10" });
  const rules = [];
  for await (const r of admin.listRules("jstopic", "audit")) rules.push(r.name);
  out.rules = rules.sort();
  const names = [];
  for await (const item of admin.listQueues()) names.push(item.name);
  out.queues = names.sort();
  out.exists = await admin.queueExists("nope");
  const rt = await admin.getQueueRuntimeProperties("jsadmin");
  out.total = rt.totalMessageCount;
  try { await admin.createQueue("jsadmin"); out.duplicate = "created"; }
  catch (e) { out.duplicate = e.code || e.name; }
  await admin.deleteQueue("jsadmin");
  out.after = await admin.queueExists("jsadmin");
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""


@pytest.fixture(scope="module")
def js_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are not installed: the JavaScript SDK test cannot run")
    where = tmp_path_factory.mktemp("js-sdk")
    done = subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", JS_SDK],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.skip(f"npm cannot install {JS_SDK}: {done.stderr.strip()[-300:]}")
    script = where / "client.js"
    script.write_text(CLIENT)
    (where / "admin.js").write_text(ADMIN)
    return script


def _run(script: Path, node: NodeProcess, env: dict[str, str] | None = None) -> Any:
    """Run a JS script with the node's connection string; what it printed last, as JSON."""
    done = subprocess.run(
        ["node", str(script), _conn(node)],
        cwd=script.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_js_sdk_sends_receives_and_completes(sb_node: NodeProcess, js_client: Path) -> None:
    admin = _admin(sb_node)
    admin.create_queue("js")
    admin.create_queue("jss", requires_session=True)
    out = _run(js_client, sb_node)
    assert out == {
        "bodies": ["j1", "j2", "j3"],
        "ids": [True, True, True],
        "seq": [1, 2, 3],
        "session": "s1",
        "sessionBodies": ["s-a", "s-b"],
        "emptyAfter": 0,  # a drain on an empty session answered: no session lock lost
        "state": "done",
    }
    assert admin.get_queue_runtime_properties("js").total_message_count == 0


def test_js_admin_client_over_https(sb_node: NodeProcess, js_client: Path) -> None:
    _admin(sb_node).create_queue("existing")
    assert sb_node.data_dir is not None
    cert = sb_node.data_dir / CERT_FILE  # the certificate the node made in its data directory
    out = _run(
        js_client.parent / "admin.js", sb_node, {**os.environ, "NODE_EXTRA_CA_CERTS": str(cert)}
    )
    assert out == {
        "queue": {"maxDeliveryCount": 7, "lockDuration": "PT45S"},
        "rules": ["$Default", "big"],
        "queues": ["existing", "jsadmin"],
        "exists": False,
        "total": 0,
        "duplicate": "MessageEntityAlreadyExistsError",
        "after": False,
    }
    assert [t.name for t in _admin(sb_node).list_topics()] == ["jstopic"]
