"""Spec of algorithm/tile_choice: products against a brute-force scan of the dense mask, and the choice."""

from grading import equal
from reference import visible

CONCEPT = "tile choice: the products a tile shape computes (padding and causal waste included), and the cheaper shape"
NEEDS_GPU = False


def brute_products(sq, sk, causal, bm, bn):
    keep = visible(sq, sk, causal=causal)
    total = 0
    for i0 in range(0, sq, bm):
        rows = keep[i0:i0 + bm]
        total += bm * sum(1 for j0 in range(0, sk, bn) if rows[:, j0:j0 + bn].any())
    return total


def check(mod, rng):
    cases = [(512, 512, True), (512, 512, False), (1024, 1024, True), (2048, 2048, True), (300, 300, True),
             (17, 17, True), (1, 1, True), (100, 700, True), (700, 100, True), (113, 4224, False)]
    cases.append((int(rng.integers(1, 3000)), int(rng.integers(1, 3000)), bool(rng.integers(0, 2))))
    for sq, sk, causal in cases:
        for bm, bn in ((192, 128), (128, 128), (64, 80)):
            name = f"Nq {sq} Nk {sk}{' causal' if causal else ''} tile {bm} x {bn}"
            equal(name, int(mod.products(sq, sk, causal, bm, bn)), brute_products(sq, sk, causal, bm, bn),
                  what="products")
        name = f"Nq {sq} Nk {sk}{' causal' if causal else ''}: choice"
        w, n = brute_products(sq, sk, causal, 192, 128), brute_products(sq, sk, causal, 128, 128)
        equal(name, mod.choose(sq, sk, causal, (192, 128), (128, 128), 0.86), "narrow" if n < 0.86 * w else "wide",
              what="tile")
    # The measured cases of docs/learn/05-hopper.md section 8b: the rule picked the faster tile each time.
    for sq, causal, best in ((512, True, "narrow"), (512, False, "wide"), (1024, True, "narrow"),
                             (2048, True, "wide"), (4096, True, "wide")):
        equal(f"seqlen {sq}{' causal' if causal else ''} (measured on the H100)",
              mod.choose(sq, sq, causal, (192, 128), (128, 128), 0.86), best, what="tile")
