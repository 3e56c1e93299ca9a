# frozen_string_literal: true

# README.md's code as the README-example specs run it: the fenced blocks of one section, read at spec
# time and never altered, so an edit to the README that breaks an example breaks its spec. Loads
# nothing else (a fixture run as its own rspec process may require it alone).
module Readme
  PATH = File.expand_path("../../README.md", __dir__)
  FENCE = /\A\s*```(\w*)\s*\z/

  # A fenced block: its language, its code as written, and the README line its code starts on.
  Block = Struct.new(:lang, :code, :line) do
    # Runs the code at the top level, as a file would; errors and backtraces name README.md's lines.
    def run(binding = TOPLEVEL_BINDING)
      binding.eval(code, PATH, line)
    end

    def to_s
      code
    end
  end

  module_function

  # The fenced blocks of the section under `heading` ("## Moving from Sidekiq", with its subsections;
  # "### Test modes" alone) in the language `lang`; raises unless there are `count`.
  def blocks(heading, lang: "ruby", count:)
    found = fenced(section(heading)).select { |block| block.lang == lang }
    raise "README.md #{heading.inspect} has #{found.size} #{lang} block(s), expected #{count}" unless found.size == count

    found
  end

  # [[line number, line], ...] of the section under `heading`, up to the next heading of its level or
  # higher (a `#` line inside a code block is code, not a heading).
  def section(heading)
    level = heading[/\A#+/].size
    lines = File.readlines(PATH)
    start = lines.index("#{heading}\n") or raise "README.md has no heading #{heading.inspect}"
    fence = false
    lines.each_with_index.drop(start + 1).map { |line, i| [i + 1, line] }.take_while do |_, line|
      fence = !fence if line.match?(FENCE)
      fence || !(line =~ /\A(#+) / && $1.size <= level)
    end
  end

  # The fenced blocks among `numbered` lines, each block's code as written (an indented block keeps
  # its indentation).
  def fenced(numbered)
    blocks = []
    open = nil
    numbered.each do |number, line|
      if open.nil? && (match = line.match(FENCE))
        open = Block.new(match[1], +"", number + 1)
      elsif open && line.match?(FENCE)
        blocks << open
        open = nil
      elsif open
        open.code << line
      end
    end
    blocks
  end
end
