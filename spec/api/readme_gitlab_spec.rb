# frozen_string_literal: true

# The README's first "GitLab-style workers" example runs as written, and each `# => value` it shows
# is what the line before the comment returns.
RSpec.describe "README: GitLab-style workers" do
  let(:block) do
    readme = File.read(File.expand_path("../../README.md", __dir__))
    section = readme[/^## GitLab-style workers\n(.*?)^## /m, 1]
    section[/```ruby\n(.*?)```/m, 1]
  end

  it "declares the worker and reads back what it shows" do
    definition, reads = block.lines.partition { |line| !line.include?("# =>") }
    TOPLEVEL_BINDING.eval(definition.join)
    expect(reads.size).to eq(8)
    reads.each do |line|
      code, shown = line.split("# =>", 2)
      expect(TOPLEVEL_BINDING.eval(code)).to eq(TOPLEVEL_BINDING.eval(shown)), "README line: #{line.strip}"
    end
  ensure
    Projects.send(:remove_const, :ImportWorker) if defined?(Projects::ImportWorker)
  end
end
