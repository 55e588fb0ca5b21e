# SPDX-License-Identifier: GPL-2.0
"""The dissertation's chapter-6 experiments with gpuslot (tests/gpu/ch6.sh)."""
