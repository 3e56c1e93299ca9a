# frozen_string_literal: true

require_relative "ordered_invariant_checker"

# The checker of ordered_invariants_spec.rb catches each kind of violation it looks for, and lets the
# kill's at-least-once rerun through.
RSpec.describe OrderedInvariantChecker do
  def a_run(token, pid, at, seen, ended: at + 0.5, ok: true)
    start = {"run" => token, "pid" => pid, "thread" => "t", "at" => at, "seen" => seen}
    ended ? [start, {"run" => token, "end" => ended, "ok" => ok}] : [start]
  end

  def check(*runs, morgue: {}, versions: 4)
    described_class.new(runs.flatten(1), ids: ["a"], versions: versions, morgue: morgue, killed_pid: 9, killed_at: 10.0).check
  end

  def kinds(checker) = checker.violations.reject { |_, list| list.empty? }.keys

  it "accepts a clean history: in order, no overlap, every version processed or in the morgue" do
    c = check(a_run("r1", 1, 1.0, {"a" => [1, 2]}), a_run("r2", 2, 2.0, {"a" => [3]}, ok: false), a_run("r3", 2, 3.0, {"a" => [3]}),
      morgue: {"a" => [4]})
    expect(kinds(c)).to eq([])
    expect(c).to be_ok
    expect(c.failed_runs).to eq(1)
  end

  it "catches two runs of one id at once" do
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [1, 2]}), a_run("r2", 2, 1.2, {"a" => [3, 4]})))).to eq([:overlap])
  end

  it "counts a run the kill cut short as lasting until the kill" do
    expect(kinds(check(a_run("r1", 9, 1.0, {"a" => [1, 2]}, ended: nil), a_run("r2", 2, 9.0, {"a" => [1, 2, 3, 4]})))).to eq([:overlap])
    expect(kinds(check(a_run("r1", 9, 1.0, {"a" => [1, 2]}, ended: nil), a_run("r2", 2, 11.0, {"a" => [1, 2, 3, 4]})))).to eq([])
  end

  it "catches versions out of order, within a run or across successful runs" do
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [2, 1, 3, 4]})))).to eq([:unsorted])
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [1, 3]}), a_run("r2", 2, 2.0, {"a" => [2, 4]})))).to eq([:order])
  end

  it "lets a killed process's unsettled run be repeated, once, and counts it" do
    c = check(a_run("r1", 9, 1.0, {"a" => [1, 2]}), a_run("r2", 2, 20.0, {"a" => [1, 2, 3, 4]}))
    expect(kinds(c)).to eq([])
    expect(c.reruns).to eq(1)
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [1, 2]}), a_run("r2", 2, 20.0, {"a" => [1, 2, 3, 4]})))).to eq([:order])
  end

  it "catches lost versions, versions both processed and in the morgue, unknown ones, and runs that never ended" do
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [1, 2, 3]})))).to eq([:missing])
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [1, 2, 3, 4]}), morgue: {"a" => [4]}))).to eq([:processed_and_in_morgue])
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [1, 2, 3, 4, 5]})))).to eq([:unknown])
    expect(kinds(check(a_run("r1", 1, 1.0, {"a" => [1, 2, 3, 4]}, ended: nil)))).to include(:unfinished)
  end
end
