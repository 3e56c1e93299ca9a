# frozen_string_literal: true

# The README's "Routing rules" example runs as written, and each `# => value` it shows is what the
# line before the comment returns.
RSpec.describe "README: Routing rules" do
  let(:block) { Readme.blocks("### Routing rules", count: 1).first }

  after do
    %i[AuthorizedProjectsWorker DiffWorker PruneWorker].each { |name| Object.send(:remove_const, name) if Object.const_defined?(name) }
  end

  it "routes the workers it declares as it shows" do
    definition, reads = block.code.lines.partition { |line| !line.include?("# =>") }
    TOPLEVEL_BINDING.eval(definition.join, Readme::PATH, block.line)
    expect(reads.size).to eq(6)
    reads.each do |line|
      code, shown = line.split("# =>", 2)
      expect(TOPLEVEL_BINDING.eval(code)).to eq(TOPLEVEL_BINDING.eval(shown)), "README line: #{line.strip}"
    end
  end
end
