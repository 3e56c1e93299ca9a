# frozen_string_literal: true

require "tmpdir"

# `bin/rails g queue:worker` in an app without RSpec (a copy of spec/rails_app without the rspec gem
# and spec/, as `rails new` makes apps): the worker is written, its spec is not (it would fail with
# LoadError), and the note says what to add. Once RSpec is added as it says, `--skip` writes the spec,
# which passes.
RSpec.describe "bin/rails g queue:worker in an app without RSpec" do
  around do |example|
    Dir.mktmpdir("queue-no-rspec-") do |dir|
      @dir = RailsApp.copy(dir)
      example.run
    end
  end

  def rails(*args)
    RailsApp.run(RbConfig.ruby, "bin/rails", *args, dir: @dir)
  end

  def path(file) = File.join(@dir, file)

  it "writes the worker, not its spec, and says how to add RSpec; with RSpec added, --skip writes a passing spec" do
    gemfile = File.read(path("Gemfile"))
    File.write(path("Gemfile"), gemfile.sub(/^group :test do\n  gem "rspec"\nend\n/, ""))
    FileUtils.rm_rf([path("spec"), path(".rspec")])

    output, status = rails("g", "queue:worker", "Hard", "--queue", "critical")
    expect(status).to be_success, output
    expect(File).to exist(path("app/workers/hard_worker.rb"))
    expect(File).not_to exist(path("spec/workers/hard_worker_spec.rb"))
    expect(output).to match(%r{skip\s+spec/workers/hard_worker_spec\.rb: this app has no RSpec})
    expect(output).to include('`gem "rspec-rails"`', "`bin/rails g rspec:install`", "`bin/rails g queue:worker Hard --queue critical --skip`")

    # RSpec as this app can have it offline (rspec, and a spec helper that loads the app).
    File.write(path("Gemfile"), gemfile)
    FileUtils.mkdir_p(path("spec"))
    File.write(path("spec/spec_helper.rb"), %(ENV["RAILS_ENV"] = "test"\nrequire_relative "../config/environment"\n))
    output, status = rails("g", "queue:worker", "Hard", "--queue", "critical", "--skip")
    expect(status).to be_success, output
    expect(output).to match(%r{(identical|skip)\s+app/workers/hard_worker\.rb}).and match(%r{create\s+spec/workers/hard_worker_spec\.rb})
    expect(File.read(path("spec/workers/hard_worker_spec.rb"))).to start_with("# frozen_string_literal: true\n\nrequire 'spec_helper'\n")

    output, status = RailsApp.run("bundle", "exec", "rspec", "spec/workers/hard_worker_spec.rb", dir: @dir)
    expect(status).to be_success, output
    expect(output).to include("2 examples, 0 failures")
  end
end
