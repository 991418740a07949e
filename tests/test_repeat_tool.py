"""tools/repeat_test.py: a test run many times, each in a fresh interpreter with a hash seed of
its own, its outcomes counted."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool():
    spec = importlib.util.spec_from_file_location(
        "repeat_test", os.path.join(ROOT, "tools", "repeat_test.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)     # __name__ is not "__main__": nothing runs
    return module


def test_each_run_has_its_own_hash_seed_and_the_first_failure_is_shown(tmp_path, capsys):
    test_file = tmp_path / "test_seeded.py"
    test_file.write_text(
        "import os\n\n\n"
        "def test_passes_on_odd_seeds():\n"
        "    assert int(os.environ['PYTHONHASHSEED']) % 2 == 1, 'an even seed'\n")
    assert _tool().main([str(test_file), "-n", "4", "-j", "2"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "     2 ok     1 passed" in lines
    assert "     2 FAILED 1 failed" in lines
    assert "The first run that failed (PYTHONHASHSEED=2):" in out and "an even seed" in out


def test_pytest_arguments_after_the_dashes_reach_each_run(tmp_path, capsys):
    test_file = tmp_path / "test_two.py"
    test_file.write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    assert _tool().main([str(test_file), "-n", "2", "--", "-k", "test_b"]) == 0
    assert capsys.readouterr().out.splitlines() == ["     2 ok     1 passed, 1 deselected"]
