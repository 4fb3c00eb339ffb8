mod mock_llm;
mod runner;
