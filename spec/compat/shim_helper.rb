# frozen_string_literal: true

require "open3"

# The compat shims (queue/compat/sidekiq, queue/compat/lowkiq) define `Sidekiq` and `Lowkiq`, which
# this RSpec process already has from the real sidekiq gem: every use of a shim runs in a separate
# Ruby process, against the suite's Redis.
module ShimHelpers
  LIB = File.join(ServerProcess::ROOT, "lib")

  # Runs `code` in a new `ruby` with lib on the load path and `requires` loaded first; returns its
  # stdout, failing the example (with the output) unless it exits 0.
  def run_ruby(code, requires: [], env: {})
    args = requires.flat_map { |r| ["-r", r] }
    out, status = Open3.capture2e({"REDIS_URL" => TestRedis.url}.merge(env), RbConfig.ruby, "-I", LIB, *args, "-e", code, chdir: ServerProcess::ROOT)
    raise "ruby exited #{status.exitstatus}:\n#{out}" unless status.success?

    out
  end

  def app_path(name)
    File.join(ServerProcess::APPS, name)
  end
end

RSpec.configure { |c| c.include ShimHelpers, :shim }
