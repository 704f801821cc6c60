# Kustodian's stdout callback for rollout.yml and the role: a line per play,
# the messages the playbooks print for the operator (the plan, each node's
# job lines and state, a cut round, the report), one line per failure that
# ends a node, and the recap. Task banners, ok/skipped results, includes
# and the failures a block rescues (a node rebooting under a step) are not
# shown: the playbooks say what those mean. Chosen by ansible.cfg
# (stdout_callback = kustodian); ANSIBLE_STDOUT_CALLBACK=default gives
# Ansible's usual output back.
from ansible.playbook.block import Block
from ansible.plugins.callback.default import CallbackModule as Default

DOCUMENTATION = """
    name: kustodian
    type: stdout
    short_description: one line per event an operator of a Kustodian rollout reads
    description:
      - The plays, the debug messages as lines, the failures that end a host, the recap.
    extends_documentation_fragment:
      - default_callback
      - result_format_callback
    requirements:
      - set as stdout_callback in ansible.cfg
"""

_DEBUG = ("debug", "ansible.builtin.debug", "ansible.legacy.debug")


def _rescued(task):
    """Whether a failure of task is caught by a rescue around it (the
    playbooks' rescues only note the failure, and say what it meant)."""
    node = getattr(task, "_parent", None)
    while node is not None:
        if isinstance(node, Block) and node.rescue:
            return True
        node = getattr(node, "_parent", None)
    return False


class CallbackModule(Default):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "kustodian"

    def _say(self, text, color=None):
        self._display.display(text, color=color)

    def v2_playbook_on_play_start(self, play):
        self._play = play
        checked = " (check mode)" if play.check_mode else ""
        self._say("== %s%s" % (play.get_name().strip(), checked))

    def v2_playbook_on_task_start(self, task, is_conditional):
        pass

    def v2_playbook_on_handler_task_start(self, task):
        pass

    def v2_playbook_on_include(self, included_file):
        pass

    def v2_runner_on_skipped(self, result):
        pass

    def v2_runner_item_on_ok(self, result):
        pass

    def v2_runner_item_on_skipped(self, result):
        pass

    def v2_runner_item_on_failed(self, result):
        pass

    def v2_runner_on_ok(self, result):
        if result._task.action not in _DEBUG:
            return
        msg = result._result.get("msg", "")
        host = result._host.get_name()
        lines = msg if isinstance(msg, list) else [msg]
        if len(lines) == 1:
            self._say("%s: %s" % (host, lines[0]))
            return
        self._say("%s:" % host)
        for line in lines:
            self._say("    %s" % line)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors or _rescued(result._task):
            return
        r = result._result
        msg = r.get("msg", "failed")
        if r.get("stderr"):
            msg = "%s: %s" % (msg, r["stderr"].strip())
        elif r.get("stdout") and "validate" in msg:
            msg = "%s: %s" % (msg, r["stdout"].strip())
        self._say("%s: FAILED: %s: %s" % (result._host.get_name(), result._task.get_name().strip(), msg), color="red")

    def v2_runner_on_unreachable(self, result):
        if result._task.ignore_unreachable or _rescued(result._task):
            return
        self._say("%s: UNREACHABLE: %s" % (result._host.get_name(), result._result.get("msg", "")), color="red")

    def v2_runner_retry(self, result):
        self._say("%s: %s: still going (%d tries left)" % (
            result._host.get_name(), result._task.get_name().strip(), result._result["retries"] - result._result["attempts"]))
