"""Code solver: the maximum sum of a non-empty contiguous subarray.

solve(nums) takes a non-empty list of integers and returns the largest sum of any
non-empty contiguous run of them. The seed below has the classic bugs: it resets the
running sum with 0 (so an all-negative list returns 0) and starts the best sum at 0.
"""


# EVOLVE-BLOCK-START
def solve(nums):
    best = 0
    current = 0
    for x in nums:
        current = max(0, current + x)
        if current > best:
            best = current
    return best
# EVOLVE-BLOCK-END
