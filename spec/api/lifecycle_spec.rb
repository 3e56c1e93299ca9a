# frozen_string_literal: true

require "queue/launcher"

# Sidekiq 6.4.1's `Sidekiq.on` (sidekiq.rb) and `fire_event` (util.rb), on our configuration. The
# moments a server fires them are compared with Sidekiq's in spec/compat/lifecycle_spec.rb; here, the
# call's checks and error handling, with an in-process launcher on the suite's Redis.
RSpec.describe "JobQueue::Configuration#on" do
  let(:config) { JobQueue.config }
  let(:events) { [] }

  before { config.logger.level = Logger::ERROR } # the reported hook errors are expected here

  it "raises ArgumentError at the call for an unknown event, as Sidekiq.on" do
    expect { config.on(:boot) {} }.to raise_error(ArgumentError, /Invalid event name: boot; use one of :startup, :quiet, :shutdown, :heartbeat/)
  end

  it "raises ArgumentError for an event given as a String, as Sidekiq.on" do
    expect { config.on("startup") {} }.to raise_error(ArgumentError, "Symbols only please: startup")
  end

  it "raises ArgumentError without a block" do
    expect { config.on(:startup) }.to raise_error(ArgumentError, /needs a block/)
  end

  it "aborts the start when a :startup block raises (Sidekiq re-raises it), before the process registers" do
    config.on(:startup) { raise "no database" }
    launcher = JobQueue::Launcher.new(config)
    expect { launcher.run }.to raise_error(RuntimeError, "no database")
    expect(TestRedis.client.smembers("processes")).to be_empty
  end

  it "reports an error in a :quiet or :shutdown block and still runs the others" do
    reported = []
    config.error_handlers << ->(error, context) { reported << [error.message, context] }
    config.on(:quiet) { events << :quiet_first }
    config.on(:quiet) { raise "quiet hook failed" }
    config.on(:shutdown) { events << :shutdown }
    launcher = JobQueue::Launcher.new(config).run
    launcher.stop

    expect(events).to eq(%i[quiet_first shutdown])
    expect(reported).to eq([["quiet hook failed", {context: "Exception during lifecycle event.", event: :quiet}]])
  end

  it "fires each event once, however often the server is quieted" do
    config.on(:quiet) { events << :quiet }
    launcher = JobQueue::Launcher.new(config).run
    launcher.quiet
    launcher.quiet
    launcher.stop
    expect(events).to eq([:quiet])
  end
end
