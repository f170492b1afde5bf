# shaped after degeaja/AgenticAI_FleetMaintenance:src/app/ml/lstm_arch.py (rewritten, not copied)
"""Model architecture: stacked LSTMs with dropout between them, sigmoid head on the last step."""
import torch.nn as nn


class LSTMModel(nn.Module):
    def __init__(self, input_size, hidden_sizes=(100, 50), dropout=0.2):
        super().__init__()
        self.lstm_layers = nn.ModuleList()
        self.dropout_layers = nn.ModuleList()
        sizes = [input_size, *hidden_sizes]
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            self.lstm_layers.append(nn.LSTM(input_size=n_in, hidden_size=n_out, batch_first=True))
            self.dropout_layers.append(nn.Dropout(dropout))
        self.fc = nn.Linear(sizes[-1], 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        for lstm, dropout in zip(self.lstm_layers, self.dropout_layers):
            x, _ = lstm(x)
            x = dropout(x)
        last_out = x[:, -1, :]
        return self.sigmoid(self.fc(last_out)).squeeze(-1)
