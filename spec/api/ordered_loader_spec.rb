# frozen_string_literal: true

# JobQueue::Ordered.loader (what the Railtie sets to eager-load a Rails app) runs before every listing
# of the ordered workers; a module of the same name that extends OrderedWorker again (a code reload)
# takes the old one's place in the registry.
RSpec.describe "JobQueue::Ordered.loader" do
  after { JobQueue::Ordered.loader = nil }

  it "loads workers before they are listed, so stats and lookups by name see them" do
    JobQueue::Ordered.loader = -> { ordered_worker("LoadedLateWorker") unless defined?(::LoadedLateWorker) }

    expect(JobQueue::Ordered.stats["by_worker"]).to include("LoadedLateWorker" => {"length" => 0, "morgue_length" => 0, "lag" => 0.0})
    expect(JobQueue::Ordered.worker("LoadedLateWorker")).to equal(LoadedLateWorker)
  end

  it "takes a callable or nil, and says so when given anything else" do
    expect { JobQueue::Ordered.loader = :eager_load }.to raise_error(ArgumentError, /loader must respond to call \(or be nil\), got :eager_load/)
    expect(JobQueue::Ordered.loader).to be_nil
  end

  it "lists a reloaded worker once: the new module of the name replaces the old" do
    old = ordered_worker("ReloadedWorker")
    hide_const("ReloadedWorker")
    new = ordered_worker("ReloadedWorker")

    expect(JobQueue::Ordered.workers.select { |w| w.name == "ReloadedWorker" }).to eq([new])
    expect(JobQueue::OrderedWorker.workers).not_to include(old)
  end
end
