import subprocess

import pytest
from helpers import have_nvcc

from autotune.core.types import UserError
from autotune.kernels.expr import Expr


def test_evaluates_integer_arithmetic_and_helpers():
    e = Expr.parse("cdiv(M, BM) * cdiv(N, BN) + max(1, K // 3) % 5")
    assert e.names == {"M", "BM", "N", "BN", "K"}
    assert e({"M": 1000, "BM": 128, "N": 4097, "BN": 256, "K": 20}) == 8 * 17 + 6 % 5
    assert Expr.parse("BM % TM == 0 and not TN < 4")({"BM": 128, "TM": 8, "TN": 4}) is True
    assert Expr.parse("1 if X > 2 else 7")({"X": 2}) == 7


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "BM.bit_length()",
        "[1][0]",
        "lambda: 1",
        "'a'",
        "1.5",
        "open('x')",
        "BM ** 2",
        "BM / 2",
        "print(1)",
        "x := 3",
        "True",
    ],
)
def test_rejects_everything_outside_the_allow_list(text):
    with pytest.raises(UserError):
        Expr.parse(text)


@pytest.mark.skipif(not have_nvcc(), reason="needs a C++ compiler (nvcc)")
def test_c_translation_computes_the_same_values(tmp_path):
    exprs = [
        "cdiv(M, BM) * cdiv(N, BN)",
        "min(M, 7) + max(N, K) - K // 3",
        "1 if M > N else 2",
        "(M % BM == 0) or (N >= K)",
        "min(M, cdiv(BM, 3) * N) if BN > 32 else K",
        "16 * cdiv(BM, 4) + 4 * M * BN if BN == 64 else 0",
    ]
    env = {"BM": 128, "BN": 64}
    points = [(1, 1, 1), (1000, 4097, 33), (128, 64, 7), (4096, 1, 8192)]
    body = "\n".join(f'  printf("%lld\\n", (long long)({Expr.parse(t).to_c(env)}));' for t in exprs)
    src = (
        "#include <cstdio>\n#include <cstdlib>\n"
        f"int main(int c, char** v) {{ int M = atoi(v[1]), N = atoi(v[2]), K = atoi(v[3]);\n{body}\n}}\n"
    )
    (tmp_path / "t.cpp").write_text(src)
    subprocess.run(["nvcc", "-o", str(tmp_path / "t"), str(tmp_path / "t.cpp")], check=True)
    for M, N, K in points:
        out = subprocess.run(
            [str(tmp_path / "t"), str(M), str(N), str(K)], capture_output=True, text=True, check=True
        ).stdout.split()
        want = [int(Expr.parse(t)({**env, "M": M, "N": N, "K": K})) for t in exprs]
        assert [int(x) for x in out] == want


def test_c_translation_folds_what_the_config_fixes():
    env = {"BM": 128, "BN": 64, "S": 0}
    assert Expr.parse("cdiv(BM, 3) * BN").to_c(env) == "2752"
    assert Expr.parse("M if S else cdiv(N, BN)").to_c(env) == "((N + 64 - 1) / 64)"
    assert Expr.parse("BN > 32 and M > 1").to_c(env) == "(1 && ((M > 1)))"
